package plot

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// Chart is one report, or one table, to draw.
type Chart struct {
	// Title heads the panel: what was simulated ("llama-7b on H100-80GB:
	// batch 8 x seq 2048, ..."). Empty means a generic title.
	Title string
	// Report must carry a timeline (sim.Options{Timeline: true}).
	Report *replay.Report
	// Table, when set instead of Report, draws a chart of a table's
	// columns (table.go).
	Table *TableChart
}

// Panel geometry, in pixels. One chart is a Width x Height panel; several
// stack vertically.
const (
	Width  = 960
	Height = 546

	padLeft  = 84
	padRight = 28
	plotTop  = 120 // below the five header lines and the phase names; lower when lines wrap
	plotBot  = 436
	stripTop = 444
	stripBot = 460
)

// Colours: Paul Tol's "bright" scheme for categories (distinguishable with
// common colour-vision deficiencies), a muted set for phases.
var (
	categoryColor = map[string]string{
		"params": "#4477AA", "grads": "#228833", "optimizer": "#66CCEE",
		"activations": "#CCBB44", "temporaries": "#EE6677", "comm": "#AA3377",
	}
	phaseColor = map[replay.Phase]string{
		replay.PhaseSetup: "#DDDDDD", replay.PhaseValidation: "#BBCCEE", replay.PhaseGeneration: "#99DDFF", replay.PhaseForward: "#77AADD",
		replay.PhaseRecompute: "#EE8866", replay.PhaseBackward: "#AAAA00", replay.PhaseOptimizer: "#44BB99",
	}
	phaseOrder = []replay.Phase{replay.PhaseSetup, replay.PhaseValidation, replay.PhaseGeneration, replay.PhaseForward, replay.PhaseRecompute, replay.PhaseBackward, replay.PhaseOptimizer}
)

const (
	colorPeak     = "#CC3311"
	colorLimit    = "#000000"
	colorReserved = "#555555"
	colorLargest  = "#332288"
	colorOOM      = "#CC0000"
)

// WriteSVG writes a standalone SVG document (it opens in a browser and
// embeds in HTML) with one panel per chart, top to bottom: a report's
// timeline, or a table's chart.
func WriteSVG(w io.Writer, charts []Chart) error {
	s, err := svgDocument(charts)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, s)
	return err
}

func svgDocument(charts []Chart) (string, error) {
	if len(charts) == 0 {
		return "", errors.New("nothing to plot: no report")
	}
	var s svgWriter
	panels := len(charts)
	for _, c := range charts {
		if c.Table == nil && hasModules(c.Report) {
			panels++ // a report's time by module
		}
	}
	h := Height * panels
	s.raw(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n", Width, h, Width, h)
	s.raw("<title>%s</title>\n", esc(docTitle(charts)))
	at := 0
	for i, c := range charts {
		if c.Table != nil {
			s.raw(`<g class="panel" transform="translate(0,%d)">`+"\n", at*Height)
			if err := tablePanel(&s, c.Title, c.Table); err != nil {
				return "", err
			}
			s.raw("</g>\n")
			at++
			continue
		}
		if c.Report == nil || len(c.Report.Timeline) == 0 {
			return "", fmt.Errorf("chart %d (%s) has no timeline: simulate with the timeline recorded", i+1, c.Title)
		}
		s.raw(`<g class="panel" transform="translate(0,%d)">`+"\n", at*Height)
		panel(&s, c)
		s.raw("</g>\n")
		at++
		if hasModules(c.Report) {
			s.raw(`<g class="panel modules" transform="translate(0,%d)">`+"\n", at*Height)
			modulesPanel(&s, c.Title, c.Report)
			s.raw("</g>\n")
			at++
		}
	}
	s.raw("</svg>\n")
	return s.b.String(), nil
}

func docTitle(charts []Chart) string {
	t := "memory timeline"
	if charts[0].Table != nil {
		t = "chart"
	}
	if charts[0].Title != "" {
		t += ": " + charts[0].Title
	}
	if len(charts) > 1 {
		t += fmt.Sprintf(" (and %d more)", len(charts)-1)
	}
	return t
}

// frame maps bytes and columns to panel coordinates.
type frame struct {
	x0, x1, y0, y1 float64
	top            float64 // bytes at y0
	n              int     // columns
}

func (f frame) x(i int) float64      { return f.x0 + (f.x1-f.x0)*float64(i)/float64(f.n) }
func (f frame) y(v int64) float64    { return f.y1 - (f.y1-f.y0)*float64(v)/f.top }
func (f frame) xmid(i int) float64   { return (f.x(i) + f.x(i+1)) / 2 }
func (f frame) width() float64       { return f.x1 - f.x0 }
func (f frame) colWidth() float64    { return f.width() / float64(f.n) }
func (f frame) onChart(v int64) bool { return float64(v) <= f.top }

// panel draws one chart in a Width x Height box at the origin.
func panel(s *svgWriter, c Chart) {
	r := c.Report
	tl := r.Timeline
	s.rect(0, 0, Width, Height, "#FFFFFF", ` class="background"`)
	limit := r.Capacity - (r.DeviceUsed - r.PeakReserved)
	below := header(s, c, limit)
	f := frame{x0: padLeft, x1: Width - padRight, y0: max(plotTop, below+23), y1: plotBot}
	cols, widened := layout(tl, int(f.width()))
	f.n = len(cols)

	// The limit is what PyTorch's allocator may reserve: capacity less the
	// memory outside it (CUDA context, workspaces, paged state). It is on
	// the chart when it is within half again of the data.
	var dataTop int64 = 1
	for _, p := range tl {
		dataTop = max(dataTop, p.Allocated, p.Reserved)
	}
	top := dataTop
	limitShown := limit > 0 && float64(limit) <= 1.5*float64(dataTop)
	if limitShown {
		top = max(top, limit)
	}
	f.top = float64(top) * 1.08

	axes(s, f)
	phaseMarks(s, f, cols) // behind the data: a boundary may fall on a spike
	areas(s, f, cols)
	reservedLine(s, f, cols)
	limitY := -1.0
	if limitShown {
		limitY = f.y(limit)
	}
	var labels labelBoxes // the labels drawn on the chart, kept apart
	peakMark(s, f, cols, tl, r, limitY, &labels)
	if limitShown {
		y := f.y(limit)
		s.line(f.x0, y, f.x1, y, colorLimit, ` stroke-width="1.5" class="limit"`)
		text := "PyTorch limit " + units.FormatBytes(limit)
		labels.add(f.x1-4, y-4, "end", text)
		s.text(f.x1-4, y-4, 11, "end", colorLimit, "limit-label", text)
	} else {
		text := fmt.Sprintf("↑ PyTorch limit %s is off the chart", units.FormatBytes(limit))
		labels.add(f.x1-4, f.y0+14, "end", text)
		s.text(f.x1-4, f.y0+14, 11, "end", colorLimit, "limit-label", text)
	}
	allocMark(s, f, cols, eventOf(tl, r.Largest), colorLargest, "largest", "largest "+units.FormatBytes(r.Largest.Bytes), &labels)
	if r.OOM != nil {
		allocMark(s, f, cols, eventOf(tl, r.OOM.Alloc), colorOOM, "oom", "out of memory", &labels)
	}
	strip(s, f, cols)
	hoverMap(s, f, cols)
	xlabel := fmt.Sprintf("allocation and free events of one training step, in order (%d events)", len(tl))
	if widened {
		xlabel += fmt.Sprintf("; short phases widened to %.0f%%", 100*minPhaseShare)
	}
	s.text((f.x0+f.x1)/2, stripBot+22, 12, "middle", "#333333", "x-label", xlabel)
	legend(s, f, cols)
}

// header writes the title and up to four figures, each wrapped over up
// to three lines rather than cut: the verdict and device memory, the
// peak, the largest allocation, the first failing one. It returns the
// baseline of its last line.
func header(s *svgWriter, c Chart, limit int64) float64 {
	r := c.Report
	title := c.Title
	if title == "" {
		title = "memory over one training step"
	}
	room := float64(Width - 2*16)
	s.raw(`<text x="16" y="26" font-size="16" font-weight="bold" fill="#000000" class="title">%s</text>`+"\n", esc(fit(title, room, 16)))
	verdict := "fits"
	if !r.Fits {
		verdict = "does not fit"
	}
	figures := fmt.Sprintf("%s: device used %s of %s · peak reserved %s · PyTorch limit %s (%s outside its allocator)",
		verdict, units.FormatBytes(r.DeviceUsed), units.FormatBytes(r.Capacity), units.FormatBytes(r.PeakReserved),
		units.FormatBytes(limit), units.FormatBytes(r.Capacity-limit))
	y := 29.0
	line := func(color, class, text string) {
		for i, l := range wrapText(text, room-16, 12, 3) {
			y += 17
			x := 16.0
			if i > 0 {
				x = 32 // continuation lines are indented
			}
			s.text(x, y, 12, "start", color, class, l)
		}
	}
	line("#000000", "figures", figures)
	line(colorPeak, "header-peak", fmt.Sprintf("● peak allocated %s in %s, %s",
		units.FormatBytes(r.PeakAllocated), r.PeakAt.Phase, r.PeakAt.Op))
	line(colorLargest, "header-largest", "▼ largest allocation: "+describe(r.Largest))
	if r.OOM != nil {
		line(colorOOM, "header-oom", "▼ first failing allocation: "+describe(r.OOM.Alloc))
	}
	return y
}

// describe is "1000.00 MiB fp32[8, 1024, 32000] loss.out.fp32 in forward, op loss.to_fp32".
func describe(a replay.Alloc) string {
	shape := make([]string, len(a.Shape))
	for i, n := range a.Shape {
		shape[i] = fmt.Sprint(n)
	}
	return fmt.Sprintf("%s %s[%s] %s in %s, op %s", units.FormatBytes(a.Bytes), a.DType.Name(), strings.Join(shape, ", "), a.Tensor, a.Phase, a.Op)
}

// labelBoxes are the boxes of the labels drawn on a chart, so that the
// next is placed where it overlaps none.
type labelBoxes []box

// textBox is the box of 11 px text at (x, y) with the given anchor
// (glyphs taken as 0.58 em wide, as fit does).
func textBox(x, y float64, anchor, text string) box {
	w := 0.58 * 11 * float64(len([]rune(text)))
	switch anchor {
	case "end":
		x -= w
	case "middle":
		x -= w / 2
	}
	return box{x, y - 10, x + w, y + 2}
}

func (l *labelBoxes) add(x, y float64, anchor, text string) {
	*l = append(*l, textBox(x, y, anchor, text))
}

// place returns the baseline nearest y (trying a line below, then above,
// then two, ...) where text overlaps no label drawn, and records it.
func (l *labelBoxes) place(x, y float64, anchor, text string) float64 {
	at := y
	for k := 0; k < 8 && textBox(x, at, anchor, text).hitsAny(*l); k++ {
		at = y + float64((k/2+1)*13)*[]float64{1, -1}[k%2]
	}
	l.add(x, at, anchor, text)
	return at
}

// axes draws the y grid with byte labels and the two axis lines.
func axes(s *svgWriter, f frame) {
	step, unit, name := byteTicks(int64(f.top), 8)
	for v := int64(0); float64(v) <= f.top; v += step {
		y := f.y(v)
		if v > 0 {
			s.line(f.x0, y, f.x1, y, "#E5E5E5", ` class="grid"`)
		}
		s.text(f.x0-6, y+4, 11, "end", "#333333", "tick", tickLabel(v, unit, name))
	}
	s.line(f.x0, f.y0, f.x0, f.y1, "#333333", ` class="axis"`)
	s.line(f.x0, f.y1, f.x1, f.y1, "#333333", ` class="axis"`)
	s.raw(`<text transform="translate(18,%.1f) rotate(-90)" font-size="12" text-anchor="middle" fill="#333333" class="y-label">allocated (PyTorch tensors)</text>`+"\n", (f.y0+f.y1)/2)
}

// areas stacks the categories, bottom to top in report order, as step
// paths: memory is constant between events.
func areas(s *svgWriter, f frame, cols []column) {
	below := make([]int64, len(cols))
	for c, name := range core.CategoryNames() {
		drawn := false
		for _, col := range cols {
			if col.pt.ByCat[c] != 0 {
				drawn = true
				break
			}
		}
		if !drawn {
			continue
		}
		above := make([]int64, len(cols))
		for i, col := range cols {
			above[i] = below[i] + col.pt.ByCat[c]
		}
		var d strings.Builder
		fmt.Fprintf(&d, "M%.1f %.1f", f.x(0), f.y(above[0]))
		for i := range cols {
			if i > 0 {
				fmt.Fprintf(&d, "V%.1f", f.y(above[i]))
			}
			fmt.Fprintf(&d, "H%.1f", f.x(i+1))
		}
		for i := len(cols) - 1; i >= 0; i-- {
			fmt.Fprintf(&d, "V%.1f", f.y(below[i]))
			fmt.Fprintf(&d, "H%.1f", f.x(i))
		}
		d.WriteString("Z")
		s.raw(`<path d="%s" fill="%s" class="area" data-category="%s"><title>%s</title></path>`+"\n", d.String(), categoryColor[name], name, name)
		below = above
	}
}

// reservedLine draws what the caching allocator holds as a dashed step line.
func reservedLine(s *svgWriter, f frame, cols []column) {
	var d strings.Builder
	fmt.Fprintf(&d, "M%.1f %.1f", f.x(0), f.y(cols[0].reserved))
	for i, col := range cols {
		if i > 0 {
			fmt.Fprintf(&d, "V%.1f", f.y(col.reserved))
		}
		fmt.Fprintf(&d, "H%.1f", f.x(i+1))
	}
	s.raw(`<path d="%s" fill="none" stroke="%s" stroke-width="1.2" stroke-dasharray="4 3" class="reserved"/>`+"\n", d.String(), colorReserved)
}

// phaseMarks separates the major phases (setup, forward, backward with its
// recomputation, optimizer) with dotted lines and names them above the
// plot.
func phaseMarks(s *svgWriter, f frame, cols []column) {
	for _, run := range phaseRuns(cols, majorPhase) {
		x := f.x(run.first)
		if run.first > 0 {
			s.line(x, f.y0, x, f.y1, "#777777", ` stroke-dasharray="2 3" class="phase-boundary"`)
		}
		if name := label(run.phase.String(), f.x(run.end)-x-8, 11); name != "" {
			s.text(x+3, f.y0-6, 11, "start", "#333333", "phase-label", name)
		}
	}
}

// peakMark draws the peak of allocated memory as a dashed line and a dot
// at its first event. Its label goes under the line when the limit line
// (at limitY, -1 for none) is too close above it.
func peakMark(s *svgWriter, f frame, cols []column, tl []replay.Point, r *replay.Report, limitY float64, labels *labelBoxes) {
	y := f.y(r.PeakAllocated)
	s.line(f.x0, y, f.x1, y, colorPeak, ` stroke-dasharray="6 3" class="peak"`)
	ly := y - 4
	if limitY >= 0 && y-limitY < 14 && y-limitY > -4 {
		ly = y + 13
	}
	text := "peak allocated " + units.FormatBytes(r.PeakAllocated)
	labels.add(f.x0+4, ly, "start", text)
	s.text(f.x0+4, ly, 11, "start", colorPeak, "peak-label", text)
	if i := peakEvent(tl); i >= 0 {
		ci := columnOf(cols, i)
		s.raw(`<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s" class="peak-point"/>`+"\n", f.xmid(ci), f.y(tl[i].Allocated), colorPeak)
	}
}

// allocMark marks the event that made one allocation: a triangle
// pointing at the height reached, hung from a line above the data (which
// it leaves visible).
func allocMark(s *svgWriter, f frame, cols []column, event int, color, class, label string, labels *labelBoxes) {
	if event < 0 {
		return
	}
	ci := columnOf(cols, event)
	x := f.xmid(ci)
	top := f.y(cols[ci].pt.Allocated)
	s.line(x, f.y0+18, x, max(top-9, f.y0+18), color, fmt.Sprintf(` stroke-width="1.2" class="%s"`, class))
	s.raw(`<path d="M%.1f %.1fl-5 -9h10z" fill="%s" class="%s-marker"/>`+"\n", x, top, color, class)
	anchor, dx := "start", 8.0
	if x > (f.x0+f.x1)/2 {
		anchor, dx = "end", -8
	}
	s.text(x+dx, labels.place(x+dx, top-2, anchor, label), 11, anchor, color, class+"-label", label)
}

// strip is a band under the x axis coloured by phase, recompute included,
// named where a run is wide enough.
func strip(s *svgWriter, f frame, cols []column) {
	for _, run := range phaseRuns(cols, func(p replay.Phase) replay.Phase { return p }) {
		x, w := f.x(run.first), f.x(run.end)-f.x(run.first)
		s.raw(`<rect x="%.1f" y="%d" width="%.2f" height="%d" fill="%s" class="phase" data-phase="%s"/>`+"\n",
			x, stripTop, w, stripBot-stripTop, phaseColor[run.phase], run.phase)
		if name := label(run.phase.String(), w-6, 10); name != "" {
			s.text(x+3, stripBot-4, 10, "start", "#000000", "phase-strip-label", name)
		}
	}
}

// legend names the categories drawn, the lines, and the phase colours.
func legend(s *svgWriter, f frame, cols []column) {
	x, y := f.x0, float64(stripBot+44)
	item := func(swatch, label string) {
		s.raw(swatch, x, y)
		s.text(x+18, y+4, 11, "start", "#333333", "legend", label)
		x += 18 + 0.58*11*float64(len([]rune(label))) + 16
	}
	for c, name := range core.CategoryNames() {
		for _, col := range cols {
			if col.pt.ByCat[c] != 0 {
				item(`<rect x="%.1f" y="%.1f" width="12" height="8" transform="translate(0,-4)" fill="`+categoryColor[name]+`" class="legend-swatch"/>`+"\n", name)
				break
			}
		}
	}
	item(`<path d="M%.1f %.1fh12" stroke="`+colorReserved+`" stroke-dasharray="4 3" stroke-width="1.2"/>`+"\n", "reserved")
	item(`<path d="M%.1f %.1fh12" stroke="`+colorPeak+`" stroke-dasharray="6 3"/>`+"\n", "peak allocated")
	item(`<path d="M%.1f %.1fh12" stroke="`+colorLimit+`" stroke-width="1.5"/>`+"\n", "PyTorch limit")
	x, y = f.x0, y+20
	present := map[replay.Phase]bool{}
	for _, c := range cols {
		present[c.pt.Phase] = true
	}
	for _, p := range phaseOrder {
		if (p == replay.PhaseValidation || p == replay.PhaseGeneration) && !present[p] {
			continue // only plans with validation=True, or GRPO's generation, have it
		}
		item(`<rect x="%.1f" y="%.1f" width="12" height="8" transform="translate(0,-4)" fill="`+phaseColor[p]+`"/>`+"\n", p.String())
	}
}

// hoverMap records, for a page that shows what is alive under the
// pointer (memsh plot -http), the plot area and the timeline event each
// column stands for.
func hoverMap(s *svgWriter, f frame, cols []column) {
	var ev strings.Builder
	for i, c := range cols {
		if i > 0 {
			ev.WriteByte(',')
		}
		fmt.Fprintf(&ev, "%d", c.at)
	}
	s.raw(`<g class="hover-map" data-x0="%g" data-x1="%g" data-y0="%g" data-y1="%g" data-events="%s"></g>`+"\n", f.x0, f.x1, f.y0, f.y1, ev.String())
}
