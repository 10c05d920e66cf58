package builtins

import (
	"fmt"
	"io"
	"strings"

	"github.com/memsh/memsh/sim"
)

// Renderer is a value that prints as a table: reports, and whatever else
// wants print() and the REPL to show it with colour on a terminal.
type Renderer interface {
	Render(w io.Writer, color bool) error
}

var _ Renderer = (*Report)(nil)

// ANSI colours for verdicts: fits, tight, does not fit.
const (
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiRed    = "\x1b[31m"
	ansiBold   = "\x1b[1m"
	ansiReset  = "\x1b[0m"
)

func paint(color bool, code, s string) string {
	if !color || s == "" {
		return s
	}
	return code + s + ansiReset
}

// tightFraction is the headroom below which a fitting plan is called
// tight: SEEDS.md story 2 advises budgeting 10-15 % on top of a simulated
// peak (allocator and kernel-selection variance between runs).
const tightFraction = 0.10

// barWidth is the width of a full-capacity bar in the breakdown.
const barWidth = 24

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
func (x *Report) verdict() (string, string) {
	r := x.r
	switch {
	case !r.Fits:
		return fmt.Sprintf("does not fit: needs %s of %s (%s short)",
			sim.FormatBytes(r.DeviceUsed), sim.FormatBytes(r.Capacity), sim.FormatBytes(-r.Headroom)), ansiRed
	case float64(r.Headroom) < tightFraction*float64(r.Capacity):
		return fmt.Sprintf("fits, tight: %s of %s used, %s headroom (under 10%%)",
			sim.FormatBytes(r.DeviceUsed), sim.FormatBytes(r.Capacity), sim.FormatBytes(r.Headroom)), ansiYellow
	}
	return fmt.Sprintf("fits: %s of %s used, %s headroom",
		sim.FormatBytes(r.DeviceUsed), sim.FormatBytes(r.Capacity), sim.FormatBytes(r.Headroom)), ansiGreen
}

// summary is r.summary: the verdict line.
func (x *Report) summary() string {
	s, _ := x.verdict()
	return s
}

// render writes:
//
//	llama-7b on A100-80GB: batch 1 x seq 2048, bf16-mixed, adamw(), no checkpointing
//	  does not fit: needs 117.49 GiB of 80.00 GiB (37.49 GiB short)
//
//	  params          25.10 GiB  ███████▌       21.4%
//	  ...
//	  peak at     backward, layers.0.attn.q_proj
//	  largest     500.00 MiB  fp32[32000, 4096]  embed.weight (parameter), setup
//	  OOM         CUDA out of memory. Tried to allocate ...
func (x *Report) render(b *strings.Builder, color bool) {
	r, p := x.r, x.plan
	fmt.Fprintf(b, "%s on %s: %s\n", paint(color, ansiBold, p.p.Model.Name), p.p.Device.Name, p.Summary())
	v, code := x.verdict()
	fmt.Fprintf(b, "  %s\n\n", paint(color, code, v))

	scale := max(r.Capacity, r.DeviceUsed)
	g := &textGrid{right: []bool{false, true, false, true}}
	for _, s := range r.Breakdown {
		g.add(s.Name, sim.FormatBytes(s.Bytes), bar(s.Bytes, scale), percent(s.Bytes, r.DeviceUsed))
	}
	g.write(b, "  ")
	fmt.Fprintf(b, "  peak allocated %s, reserved %s, device used %s (of which paged optimizer state %s)\n",
		sim.FormatBytes(r.PeakAllocated), sim.FormatBytes(r.PeakReserved), sim.FormatBytes(r.DeviceUsed), sim.FormatBytes(pagedState(p.p, r)))
	fmt.Fprintf(b, "  params %s (%s trainable), saved activations %s\n\n",
		thousands(r.Params), thousands(r.TrainableParams), sim.FormatBytes(r.SavedActivations))

	d := &textGrid{}
	d.add("peak at", r.PeakAt.Phase+", "+r.PeakAt.Op)
	d.add("largest", describeAlloc(r.Largest))
	if r.OOM != nil {
		d.add("OOM", "at "+describeAlloc(r.OOM.Alloc))
		d.add("", paint(color, ansiRed, r.OOM.Message))
	}
	for _, n := range r.Notes {
		d.add("note", n)
	}
	d.write(b, "  ")
}

// pagedState is optimizer state in CUDA unified memory: in device use,
// outside the allocator's breakdown.
func pagedState(p *sim.Plan, r *sim.Report) int64 {
	if p.Optimizer.Paged() {
		return r.States.Optimizer
	}
	return 0
}

// describeAlloc is "500.00 MiB fp32[32000, 4096] embed.weight (parameter) in setup, op model".
func describeAlloc(a sim.Alloc) string {
	shape := make([]string, len(a.Shape))
	for i, n := range a.Shape {
		shape[i] = fmt.Sprint(n)
	}
	s := fmt.Sprintf("%s %s[%s] %s", sim.FormatBytes(a.Bytes), a.DType.Name(), strings.Join(shape, ", "), a.Tensor)
	if a.Why != "" {
		s += " (" + a.Why + ")"
	}
	return s + " in " + a.Phase + ", op " + a.Op
}

// bar draws n bytes as a bar whose full width is scale, in eighths of a
// character.
func bar(n, scale int64) string {
	if n <= 0 || scale <= 0 {
		return ""
	}
	eighths := int(float64(n) / float64(scale) * barWidth * 8)
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
