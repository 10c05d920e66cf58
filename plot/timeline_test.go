package plot

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/replay"
)

// svgElement is one element of a parsed SVG.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string
}

// parseSVG decodes an SVG strictly and returns its elements in order.
func parseSVG(t *testing.T, svg []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	dec.Strict = true
	var els []svgElement
	var open []int
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			e := svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			els = append(els, e)
			open = append(open, len(els)-1)
		case xml.EndElement:
			open = open[:len(open)-1]
		case xml.CharData:
			if len(open) > 0 {
				els[open[len(open)-1]].text += string(tok)
			}
		}
	}
	if len(els) == 0 || els[0].name != "svg" || els[0].attrs["xmlns"] != "http://www.w3.org/2000/svg" {
		t.Fatalf("root is not an <svg> in the SVG namespace")
	}
	return els
}

func byClass(els []svgElement, class string) []svgElement {
	var out []svgElement
	for _, e := range els {
		if e.attrs["class"] == class {
			out = append(out, e)
		}
	}
	return out
}

func TestTimelineSVG(t *testing.T) {
	// RTX 4090 (23.99 GiB), batch 16: fits with 12.8 GiB to spare, so the
	// limit is more than half again the data and is off the chart.
	r := quickstartReport(t, "RTX-4090", 16)
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Title: "gpt-350m on RTX-4090", Report: r}}))
	els := parseSVG(t, b.Bytes())

	if got := els[0].attrs["width"]; got != strconv.Itoa(Width) {
		t.Errorf("width = %s, want %d", got, Width)
	}
	// Stacked areas for the categories that hold memory, bottom to top in
	// report order (comm holds none on one GPU).
	var cats []string
	for _, e := range byClass(els, "area") {
		cats = append(cats, e.attrs["data-category"])
	}
	if got, want := strings.Join(cats, " "), "params grads optimizer activations temporaries"; got != want {
		t.Errorf("areas = %q, want %q", got, want)
	}
	// Phases in the strip, recompute included (full checkpointing).
	phases := map[string]int{}
	for _, e := range byClass(els, "phase") {
		phases[e.attrs["data-phase"]]++
	}
	for _, p := range []string{"setup", "forward", "recompute", "backward", "optimizer"} {
		if phases[p] == 0 {
			t.Errorf("no %s run in the phase strip", p)
		}
	}
	// 12 checkpointed blocks: 12 recompute runs between backward runs.
	if phases["recompute"] != 12 {
		t.Errorf("recompute runs = %d, want 12 (one per checkpointed block)", phases["recompute"])
	}
	var labels []string
	for _, e := range byClass(els, "phase-label") {
		labels = append(labels, e.text)
	}
	// The optimizer's run is wide enough for its whole name: its foreach
	// temporaries are an allocation per parameter (core.Optimizer.StepTemporary).
	if got, want := strings.Join(labels, " "), "setup forward backward optimizer"; got != want {
		t.Errorf("phase labels = %q, want %q", got, want)
	}
	for _, class := range []string{"reserved", "peak", "peak-point", "largest", "largest-marker", "largest-label", "header-largest", "title", "limit-label", "x-label"} {
		if len(byClass(els, class)) != 1 {
			t.Errorf("want one element of class %q, got %d", class, len(byClass(els, class)))
		}
	}
	if n := len(byClass(els, "limit")); n != 0 {
		t.Errorf("limit line drawn although off the chart")
	}
	if got := byClass(els, "limit-label")[0].text; !strings.Contains(got, "off the chart") {
		t.Errorf("limit label = %q", got)
	}
	if n := len(byClass(els, "oom")); n != 0 {
		t.Errorf("oom marked for a plan that fits")
	}
	// The peak line sits at the peak: y = plotBot - (plotBot-plotTop) * peak / top.
	peak := byClass(els, "peak")[0]
	y, _ := strconv.ParseFloat(peak.attrs["y1"], 64)
	var dataTop int64
	for _, p := range r.Timeline {
		dataTop = max(dataTop, p.Allocated, p.Reserved)
	}
	want := plotBot - (plotBot-plotTop)*float64(r.PeakAllocated)/(float64(dataTop)*1.08)
	if y < want-0.1 || y > want+0.1 {
		t.Errorf("peak line at y=%.1f, want %.1f", y, want)
	}
	// The largest allocation is the fp32 logits for the loss, marked in
	// the forward pass.
	if got := byClass(els, "header-largest")[0].text; !strings.Contains(got, "fp32[16, 1024, 32000] loss.out.fp32 in forward") {
		t.Errorf("largest label = %q", got)
	}
}

func TestTimelineSVGOutOfMemory(t *testing.T) {
	// Batch 64 does not fit in 24 GiB: the limit is on the chart and the
	// first failing allocation is marked.
	r := quickstartReport(t, "RTX-4090", 64)
	if r.OOM == nil {
		t.Fatal("want an OOM at batch 64 on an RTX 4090")
	}
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Report: r}}))
	els := parseSVG(t, b.Bytes())
	for _, class := range []string{"limit", "oom", "oom-marker", "oom-label", "header-oom"} {
		if len(byClass(els, class)) != 1 {
			t.Errorf("want one element of class %q, got %d", class, len(byClass(els, class)))
		}
	}
	if got := byClass(els, "title")[0].text; got != "memory over one training step" {
		t.Errorf("default title = %q", got)
	}
}

func TestWriteSVGErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		charts []Chart
		want   string
	}{
		{"none", nil, "nothing to plot"},
		{"no timeline", []Chart{{Title: "t", Report: &replay.Report{}}}, "chart 1 (t) has no timeline"},
	} {
		err := WriteSVG(io.Discard, tc.charts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestSeveralChartsStack(t *testing.T) {
	r := quickstartReport(t, "RTX-4090", 8)
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Title: "a", Report: r}, {Title: "b", Report: r}}))
	els := parseSVG(t, b.Bytes())
	// each report: its timeline, then its time by module
	if got := els[0].attrs["height"]; got != strconv.Itoa(4*Height) {
		t.Errorf("height = %s, want %d", got, 4*Height)
	}
	panels := byClass(els, "panel")
	if len(panels) != 2 || panels[1].attrs["transform"] != "translate(0,"+strconv.Itoa(2*Height)+")" {
		t.Errorf("panels = %v", panels)
	}
	if mods := byClass(els, "panel modules"); len(mods) != 2 || mods[0].attrs["transform"] != "translate(0,"+strconv.Itoa(Height)+")" {
		t.Errorf("module panels = %v", mods)
	}
}

func TestWriteHTML(t *testing.T) {
	r := quickstartReport(t, "RTX-4090", 8)
	var b bytes.Buffer
	must(t, WriteHTML(&b, "memsh: <q>.star", []Section{{Chart: &Chart{Title: "a", Report: r}, Table: "line 1 & 2\n"}}))
	s := b.String()
	for _, want := range []string{"<!DOCTYPE html>", "<title>memsh: &lt;q&gt;.star</title>", `<svg xmlns="http://www.w3.org/2000/svg"`, "<pre>line 1 &amp; 2</pre>"} {
		if !strings.Contains(s, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}

// A report's second panel is its time by module: one bar per row of
// r.modules (at most modulesShown), slowest first, labelled with its
// share of the step.
func TestModulesPanel(t *testing.T) {
	r := quickstartReport(t, "RTX-4090", 8)
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Title: "a", Report: r}}))
	els := parseSVG(t, b.Bytes())
	names := byClass(els, "module-name")
	if want := min(len(r.Time.Modules), modulesShown); len(names) != want {
		t.Fatalf("%d bars, want %d", len(names), want)
	}
	values := byClass(els, "module-value")
	if !strings.Contains(values[0].text, "%") || len(byClass(els, "module-bar")) < len(names) {
		t.Errorf("values %v", values)
	}
	slowest := r.Time.Modules[0]
	for _, m := range r.Time.Modules {
		if m.Seconds > slowest.Seconds {
			slowest = m
		}
	}
	if !strings.HasPrefix(names[0].text, slowest.Name) {
		t.Errorf("first bar %q, want the slowest row %q", names[0].text, slowest.Name)
	}
}

// Labels on the chart do not overlap, even when the largest and the
// failing allocation are the same event; header lines wrap instead of
// being cut (issue 24 item 11).
func TestTimelineLabelsApart(t *testing.T) {
	r := quickstartReport(t, "RTX-4090", 64)
	if r.OOM == nil {
		t.Fatal("want an OOM at batch 64 on an RTX 4090")
	}
	r.Largest = r.OOM.Alloc // both marks on one event
	r.Largest.Tensor = "h.11.mlp.a.very.long.module.path.that.no.header.line.holds.on.one.line.of.the.panel.at.all.and.more"
	r.OOM.Alloc.Tensor = r.Largest.Tensor
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Report: r}}))
	els := parseSVG(t, b.Bytes())
	var boxes []box
	for _, class := range []string{"peak-label", "limit-label", "largest-label", "oom-label"} {
		for _, e := range byClass(els, class) {
			x, _ := strconv.ParseFloat(e.attrs["x"], 64)
			y, _ := strconv.ParseFloat(e.attrs["y"], 64)
			bx := textBox(x, y, e.attrs["text-anchor"], e.text)
			if bx.hitsAny(boxes) {
				t.Errorf("label %q at (%g, %g) overlaps another", e.text, x, y)
			}
			boxes = append(boxes, bx)
		}
	}
	if len(boxes) != 4 {
		t.Errorf("want 4 labels, got %d", len(boxes))
	}
	var header []string
	for _, class := range []string{"figures", "header-peak", "header-largest", "header-oom"} {
		for _, e := range byClass(els, class) {
			header = append(header, e.text)
			if strings.HasSuffix(e.text, "…") {
				t.Errorf("header line cut: %q", e.text)
			}
		}
	}
	if got := strings.Join(header, ""); !strings.Contains(got, r.Largest.Tensor) { // lines break inside the name
		t.Errorf("the wrapped header lacks the tensor's whole name: %q", got)
	}
	// The plot starts below the header.
	for _, e := range byClass(els, "phase-label") {
		if y, _ := strconv.ParseFloat(e.attrs["y"], 64); y < 17*6 {
			t.Errorf("phase label at y=%g is in the header", y)
		}
	}
}
