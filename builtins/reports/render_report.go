package reports

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/fatih/color"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

var _ host.Renderer = (*Report)(nil)

// tightFraction is the headroom below which a fitting plan is called
// tight: SEEDS.md story 2 advises budgeting 10-15 % on top of a simulated
// peak (allocator and kernel-selection variance between runs).
const tightFraction = 0.10

// barWidth is the width of a full-capacity bar in the breakdown.
const BarWidth = 24

// String renders the report as print(r) shows it (in colour when the run
// had colour on).
func (x *Report) String() string {
	var b strings.Builder
	x.render(&b, x.color)
	return strings.TrimSuffix(b.String(), "\n")
}

// Render writes the report table to w.
func (x *Report) Render(w io.Writer, color bool) error {
	var b strings.Builder
	x.render(&b, color)
	_, err := io.WriteString(w, b.String())
	return err
}

// verdict is the one-line answer and its colour.
func (x *Report) verdict() (string, []color.Attribute) {
	r := x.r
	switch {
	case !r.Fits:
		return fmt.Sprintf("does not fit: needs %s of %s (%s short)",
			units.FormatBytes(r.DeviceUsed), units.FormatBytes(r.Capacity), units.FormatBytes(-r.Headroom)), host.StyleRed
	case float64(r.Headroom) < tightFraction*float64(r.Capacity):
		return fmt.Sprintf("fits, tight: %s of %s used, %s headroom (under 10%%)",
			units.FormatBytes(r.DeviceUsed), units.FormatBytes(r.Capacity), units.FormatBytes(r.Headroom)), host.StyleYellow
	}
	return fmt.Sprintf("fits: %s of %s used, %s headroom",
		units.FormatBytes(r.DeviceUsed), units.FormatBytes(r.Capacity), units.FormatBytes(r.Headroom)), host.StyleGreen
}

// summary is r.summary: the verdict line.
func (x *Report) summary() string {
	s, _ := x.verdict()
	return s
}

// render writes:
//
//	llama-2-7b on A100-80GB: batch 1 x seq 2048, bf16-mixed, adamw(), no checkpointing
//	  does not fit: needs 146.90 GiB of 80.00 GiB (66.90 GiB short)
//
//	  params          25.10 GiB  ████        17.1%
//	  ...
//	  device used    146.90 GiB             100.0%
//
//	  peak allocated  125.52 GiB in optimizer, optimizer.step
//	  largest         25.10 GiB fp32[26953662464] optimizer step temporaries (...) in optimizer, op optimizer.step
//	  OOM             at 32.00 MiB bf16[4096, 4096] ... in forward, op ...
//	                  CUDA out of memory. Tried to allocate 32.00 MiB. ...
//
// The breakdown is taken at the peak of allocated memory; what device use
// adds beyond it (reserve grown after that peak, paged optimizer state)
// gets its own rows so the rows sum to the total. The free blocks and
// reserve grew lines say where the fragmentation and the reserve come
// from (report_memory.go).
func (x *Report) render(b *strings.Builder, color bool) {
	r, p := x.r, x.plan
	fmt.Fprintf(b, "%s on %s: %s\n", host.Paint(color, host.StyleBold, p.P.Model.Name), p.P.Device.Name, p.Summary())
	v, code := x.verdict()
	fmt.Fprintf(b, "  %s\n\n", host.Paint(color, code, v))

	scale := max(r.Capacity, r.DeviceUsed)
	g := &host.TextGrid{Right: []bool{false, true, false, true}}
	row := func(name string, n int64) {
		g.Add(name, units.FormatBytes(n), Bar(n, scale), percent(n, r.DeviceUsed))
	}
	for _, s := range x.breakdown() {
		if s.Bytes > 0 || (s.Name != "paged_optimizer" && s.Name != "reserved_later") {
			row(strings.ReplaceAll(s.Name, "_", " "), s.Bytes)
		}
	}
	g.Add("device used", units.FormatBytes(r.DeviceUsed), "", percent(r.DeviceUsed, r.DeviceUsed))
	g.Write(b, "  ")
	b.WriteByte('\n')

	d := &host.TextGrid{}
	x.addSparkline(d, color) // on a terminal only
	d.Add("peak allocated", fmt.Sprintf("%s in %s, %s", units.FormatBytes(r.PeakAllocated), r.PeakAt.Phase, r.PeakAt.Op))
	d.Add("peak reserved", units.FormatBytes(r.PeakReserved))
	x.describeFragmentation(d)
	x.describeRetries(d)
	d.Add("saved", fmt.Sprintf("%s of activations and %s of weight copies held for backward",
		units.FormatBytes(r.SavedActivations), units.FormatBytes(r.SavedWeightCopies)))
	d.Add("params", fmt.Sprintf("%s (%s trainable)", host.Thousands(r.Params), host.Thousands(r.TrainableParams)))
	if x.HasTime() {
		d.Add("time", describeTime(r.Time)+", "+x.describeThroughput())
	} else if r.Time.StepSeconds != 0 {
		d.Add("time", "unknown: "+p.P.Device.Name+" has no bf16_tflops or hbm_gbps (pass them to gpu())")
	}
	d.Add("largest", describeAlloc(r.Largest))
	if r.OOM != nil {
		d.Add("OOM", "at "+describeAlloc(r.OOM.Alloc))
		d.Add("", host.Paint(color, host.StyleRed, r.OOM.Message))
	}
	for _, n := range x.notes() {
		d.Add("note", n)
	}
	d.Write(b, "  ")
	if x.HasTime() {
		x.renderModules(b)
	}
}

// modulesShown is how many rows of r.modules print(r) shows.
const modulesShown = 5

// renderModules writes the slowest rows of r.modules:
//
//	time by module (r.modules has all 14 rows)
//	  layers.*.mlp.down_proj   x32   412 ms  18.3%  compute
//	  optimizer                      112 ms   4.9%  optimizer
func (x *Report) renderModules(b *strings.Builder) {
	rows := append([]replay.ModuleTime(nil), x.r.Time.Modules...)
	if len(rows) == 0 {
		return
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Seconds > rows[j].Seconds })
	fmt.Fprintf(b, "\n  time by module (r.modules has all %d rows)\n", len(rows))
	g := &host.TextGrid{Right: []bool{false, true, true, true, false}}
	for _, m := range rows[:min(len(rows), modulesShown)] {
		count := ""
		if m.Count > 1 {
			count = fmt.Sprintf("x%d", m.Count)
		}
		g.Add(m.Name, count, FormatSeconds(m.Seconds), fmt.Sprintf("%.1f%%", 100*m.Seconds/x.r.Time.StepSeconds), m.Bound)
	}
	g.Write(b, "    ")
}

// pagedState is optimizer state in CUDA unified memory: in device use,
// outside the allocator's breakdown.
func pagedState(p *core.Plan, r *replay.Report) int64 {
	if p.Optimizer.Paged() {
		return r.States.Optimizer
	}
	return 0
}

// describeAlloc is "500.00 MiB fp32[32000, 4096] embed.weight (parameter) in setup, op model".
func describeAlloc(a replay.Alloc) string {
	shape := make([]string, len(a.Shape))
	for i, n := range a.Shape {
		shape[i] = fmt.Sprint(n)
	}
	s := fmt.Sprintf("%s %s[%s] %s", units.FormatBytes(a.Bytes), a.DType.Name(), strings.Join(shape, ", "), a.Tensor)
	if a.Why != "" {
		s += " (" + a.Why + ")"
	}
	return s + " in " + a.Phase.String() + ", op " + a.Op
}

// describeTime is "step 1.52 s (forward 0.50 s, backward 1.02 s), MFU 41.3%".
func describeTime(t replay.TimeEstimate) string {
	var parts []string
	for _, s := range t.Breakdown {
		if s.Seconds > 0 {
			parts = append(parts, s.Name+" "+FormatSeconds(s.Seconds))
		}
	}
	s := "step " + FormatSeconds(t.StepSeconds)
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprintf("%s, MFU %.1f%%", s, 100*t.MFU)
}

// formatSeconds writes a duration with three significant figures in s, ms or µs.
func FormatSeconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3g s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3g ms", s*1e3)
	}
	return fmt.Sprintf("%.3g µs", s*1e6)
}

// bar draws n bytes as a bar whose full width is scale, in eighths of a
// character.
func Bar(n, scale int64) string {
	if n <= 0 || scale <= 0 {
		return ""
	}
	eighths := int(float64(n) / float64(scale) * BarWidth * 8)
	if eighths == 0 {
		eighths = 1
	}
	full, part := eighths/8, eighths%8
	s := strings.Repeat("█", full)
	if part > 0 {
		s += string([]rune("▏▎▍▌▋▊▉")[part-1])
	}
	return s
}

// percent is n as a share of total, "21.4%".
func percent(n, total int64) string {
	if total <= 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}
