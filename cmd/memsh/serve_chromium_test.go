package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	"github.com/memsh/memsh/lang"
)

// chromium is where Debian's chromium package installs the browser
// (.ci/run installs it).
const chromium = "/usr/bin/chromium"

const livePlan = `m = model("%s", embedding(1000, 64), linear(64, 256, name = "fc1"), linear(256, 64, name = "fc2"), vocab = 1000)
p = train(m, batch = 8, seq = 128, gpu = "A100-80GB")
emit(simulate(p))
emit(sweep(p, batch = [4, 8, 16]), x = "batch", y = "peak_allocated")
`

// TestLivePageInChromium loads memsh plot -http's page in headless
// Chromium: the timeline and the sweep table are there; pointing at the
// timeline lists the tensors alive there; clicking a row draws its
// timeline; saving the script reloads the page with the new run. Skipped
// without Chromium. With MEMSH_PLOT_DIR set, a screenshot of the page
// with the tooltip is kept there (the README's docs/images/live_page.png).
func TestLivePageInChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + " (apt-get install chromium)")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "live.star")
	write := func(name string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(strings.Replace(livePlan, "%s", name, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tiny-one")

	var logs bytes.Buffer
	e := &env{ctx: context.Background(), stdout: &logs, stderr: &logs, getenv: func(string) string { return "" },
		maxSteps: lang.DefaultMaxSteps, color: "never", ram: func() int64 { return 8 << 30 }}
	srv := e.liveServer(file, nil)
	srv.Interval = 50 * time.Millisecond
	srv.Rebuild(context.Background())
	watch, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go srv.Watch(watch)
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	// The timeout ends a browser that hangs; nothing here is timed.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.WindowSize(1100, 1400))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute) // generous: a loaded machine starts chromium slowly
	defer cancelTimeout()

	run := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		must(t, chromedp.Do(ctx, steps...))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		must(t, err)
		return s
	}

	// Load: two sections, a timeline and a clickable table of three rows.
	run(chromedp.Navigate(ts.URL), chromedp.WaitVisible(chromedp.CSS(`section[data-alive] svg`)))
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("table.clickable tbody tr").length`))
	must(t, err)
	if title := text(`h1`); !strings.Contains(title, "live.star") || rows != 3 {
		t.Fatalf("page title %q, %d rows; want the script's name and 3 rows", title, rows)
	}

	// Hover: the middle of the first timeline's plot area.
	type point struct{ X, Y float64 }
	pt, err := chromedp.Run(ctx, chromedp.Evaluate[point](`(() => {
		const map = document.querySelector("section[data-alive] g.hover-map");
		const svg = map.ownerSVGElement;
		const m = map.parentNode.getScreenCTM();
		const p = svg.createSVGPoint();
		p.x = (+map.dataset.x0 + +map.dataset.x1) / 2;
		p.y = (+map.dataset.y0 + +map.dataset.y1) / 2;
		const s = p.matrixTransform(m);
		return {X: s.x, Y: s.y};
	})()`))
	must(t, err)
	run(chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, pt.X, pt.Y), chromedp.WaitVisible(chromedp.CSS(`#tip tr.tensor`)))
	tip := text(`#tip`)
	if !strings.Contains(tip, "after event") || !strings.Contains(tip, "allocated") {
		t.Errorf("the tooltip says %q", tip)
	}
	if !strings.Contains(tip, "fc1") && !strings.Contains(tip, "embed") && !strings.Contains(tip, "lm_head") {
		t.Errorf("the tooltip names no module of the model: %q", tip)
	}
	if out := os.Getenv("MEMSH_PLOT_DIR"); out != "" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		must(t, err)
		must(t, os.WriteFile(filepath.Join(out, "live_page.png"), png, 0o644))
	}

	// Click the third row: its timeline is drawn under the table.
	run(chromedp.Click(chromedp.CSS(`table.clickable tbody tr[data-row="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.row-chart svg text.title`)))
	if rowTitle := text(`.row-chart svg text.title`); !strings.Contains(rowTitle, "row 3") || !strings.Contains(rowTitle, "batch 16") {
		t.Errorf("the row's timeline is titled %q, want row 3 at batch 16", rowTitle)
	}

	// Save: the page reloads with the new run.
	write("tiny-two")
	run(chromedp.WaitVisible(chromedp.Search(`//pre[contains(., "tiny-two")]`)))
	if srv.Version() < 2 {
		t.Errorf("build %d after the save", srv.Version())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
