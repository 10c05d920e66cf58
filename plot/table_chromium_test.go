package plot

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestTableChartInChromium renders sweepChart in headless Chromium and
// checks the screenshot at the hand-computed positions of
// TestTableChartSVG: each series' dots and line in its colour, the cross
// of the point that does not fit, the rings of the front. Skipped without
// Chromium; with MEMSH_PLOT_DIR set, the SVG and PNG are kept there.
func TestTableChartInChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + " (apt-get install chromium)")
	}
	dir := os.Getenv("MEMSH_PLOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Title: "sweep of batch (4) x checkpoint (2)", Table: sweepChart()}}))
	img := screenshot(t, dir, "sweep_chart", b.Bytes())

	// count finds pixels of colour hex within r pixels of (x, y).
	count := func(hex string, x, y, r int) int {
		want := parseHex(hex)
		n := 0
		for py := y - r; py <= y+r; py++ {
			for px := x - r; px <= x+r; px++ {
				if near(img.At(px, py), want) {
					n++
				}
			}
		}
		return n
	}
	for _, tc := range []struct {
		what string
		hex  string
		x, y int
		r    int
		min  int
	}{
		{"dot none batch 1 at 10 GiB", seriesColors[0], 199, 351, 3, 20},
		{"dot full batch 2 at 10 GiB", seriesColors[1], 405, 351, 3, 20},
		{"dot full batch 8 at 20 GiB", seriesColors[1], 817, 262, 3, 20},
		{"cross of none batch 4 at 35 GiB", seriesColors[0], 611, 128, 5, 12},
		{"line of none between batch 1 and 2", seriesColors[0], 302, 306, 2, 2},
		{"ring around full batch 1", colorFront, 199, 387, 2, 3},
		{"ring around full batch 8", colorFront, 825, 262, 2, 3},
	} {
		if n := count(tc.hex, tc.x, tc.y, tc.r); n < tc.min {
			t.Errorf("%s: %d pixels of %s near (%d, %d), want at least %d", tc.what, n, tc.hex, tc.x, tc.y, tc.min)
		}
	}
	// A cross, not a dot: 3 px above, below, left and right of its centre
	// (between its arms) a dot of radius 4.5 would be filled.
	between := count(seriesColors[0], 611, 125, 0) + count(seriesColors[0], 611, 131, 0) +
		count(seriesColors[0], 608, 128, 0) + count(seriesColors[0], 614, 128, 0)
	if between > 1 {
		t.Errorf("the point that does not fit looks like a dot (%d of 4 pixels between the arms filled)", between)
	}
	// Nothing is drawn where there is no point: between the series, high up.
	if n := count(seriesColors[1], 611, 200, 10); n != 0 {
		t.Errorf("%d pixels of the second series where it has no point", n)
	}
}

// screenshot writes svg to dir/name.svg, renders it in headless Chromium
// at Width x Height to dir/name.png, and decodes the PNG.
func screenshot(t *testing.T, dir, name string, svg []byte) image.Image {
	t.Helper()
	svgPath := filepath.Join(dir, name+".svg")
	pngPath := filepath.Join(dir, name+".png")
	must(t, os.WriteFile(svgPath, svg, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hung browser's guard, generous for a loaded machine
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--hide-scrollbars", "--user-data-dir="+t.TempDir(),
		fmt.Sprintf("--window-size=%d,%d", Width, Height), "--screenshot="+pngPath, "file://"+svgPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(pngPath)
	must(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	must(t, err)
	if s := img.Bounds().Size(); s.X != Width || s.Y != Height {
		t.Fatalf("screenshot is %v, want %dx%d", s, Width, Height)
	}
	return img
}
