package snapshot

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Comparing a measured snapshot (a real run's, or the oracle's) with the
// one memsh predicts for the same step. The two traces are matched on
// what both carry whatever recorded them: allocation sizes, and where the
// frames name them, the module and phase of each allocation.

// Comparison is what Compare finds.
type Comparison struct {
	Measured  Side `json:"measured"`
	Predicted Side `json:"predicted"`
	// Sizes are the allocation sizes whose counts differ: what memsh missed
	// (Measured > Predicted) or invented, largest byte difference first.
	Sizes []SizeDiff `json:"sizes"`
	// Modules are the bytes allocated by module and phase where the two
	// sides differ, largest difference first: filled when the measured
	// frames name modules as memsh does (the oracle's snapshots).
	Modules []ModuleDiff `json:"modules"`
	// Unmatched are measured events memsh cannot place: actions it does not
	// model, and frees of blocks allocated before the trace began.
	Unmatched []string `json:"unmatched"`
}

// Side is one trace's figures.
type Side struct {
	PeakAllocated int64        `json:"peak_allocated"`
	PeakReserved  int64        `json:"peak_reserved"`
	PeakEvent     int          `json:"peak_event"` // index of the event at the peak of allocated memory, -1 before the first
	AtPeak        []Allocation `json:"at_peak"`    // the largest allocations live at that peak
	Largest       []Allocation `json:"largest"`    // the largest allocations of the step
	Allocs        int          `json:"allocations"`
	// BeforeTrace is the bytes allocated when the trace began (the
	// parameters and optimizer state of a run recorded from a later step):
	// they count in the peaks, not among the allocations listed.
	BeforeTrace int64 `json:"before_trace"`
	// Segments says whether the trace records the allocator's segments
	// (CUDA's does; a CPU recording has none, so no peak reserved).
	Segments bool `json:"segments_recorded"`
}

// Allocation is one allocation as a comparison shows it.
type Allocation struct {
	Size  int64  `json:"size"`
	Where string `json:"where"` // the frames, innermost first: tensor, module, phase
}

// SizeDiff is one allocation size with different counts.
type SizeDiff struct {
	Size      int64    `json:"size"`
	Measured  int      `json:"measured"`
	Predicted int      `json:"predicted"`
	Examples  []string `json:"examples"` // where memsh allocates this size (or the measured frames when memsh never does)
}

// Bytes is the bytes of the difference: positive when memsh missed them.
func (d SizeDiff) Bytes() int64 { return int64(d.Measured-d.Predicted) * d.Size }

// ModuleDiff is the bytes one module allocates in one phase on both sides.
type ModuleDiff struct {
	Module    string `json:"module"`
	Phase     string `json:"phase"`
	Measured  int64  `json:"measured"`
	Predicted int64  `json:"predicted"`
}

// topN is how many allocations a comparison lists per side.
const topN = 5

// Compare compares a measured snapshot with a predicted one.
func Compare(measured, predicted *Snapshot) *Comparison {
	c := &Comparison{Measured: side(measured), Predicted: side(predicted)}
	mc, pc := sizeCounts(measured), sizeCounts(predicted)
	sizes := map[int64]bool{}
	for s := range mc {
		sizes[s] = true
	}
	for s := range pc {
		sizes[s] = true
	}
	for s := range sizes {
		m, p := mc[s], pc[s]
		if m.n == p.n {
			continue
		}
		ex := p.where
		if len(ex) == 0 {
			ex = m.where
		}
		c.Sizes = append(c.Sizes, SizeDiff{Size: s, Measured: m.n, Predicted: p.n, Examples: ex})
	}
	sort.Slice(c.Sizes, func(i, j int) bool {
		a, b := abs(c.Sizes[i].Bytes()), abs(c.Sizes[j].Bytes())
		return a > b || a == b && c.Sizes[i].Size > c.Sizes[j].Size
	})
	c.Modules = moduleDiffs(measured, predicted)
	c.Unmatched = unmatched(measured)
	return c
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// side replays a trace for its peaks and largest allocations, then again
// up to the peak of allocated memory for what is live there.
func side(s *Snapshot) Side {
	var out Side
	a, r := s.BeforeTrace()
	out.BeforeTrace, out.PeakAllocated, out.PeakReserved, out.PeakEvent = a, a, r, -1
	for i, e := range s.Trace {
		switch e.Action {
		case Alloc:
			a += e.Size
			out.Largest = keepLargest(out.Largest, Allocation{Size: e.Size, Where: where(e.Frames)})
			out.Allocs++
			if a > out.PeakAllocated {
				out.PeakAllocated, out.PeakEvent = a, i
			}
		case FreeRequested: // no longer allocated, though other streams may still use it
			a -= e.Size
		case SegmentAlloc, SegmentMap:
			r += e.Size
			out.Segments = true
		case SegmentFree, SegmentUnmap:
			r -= e.Size
		}
		out.PeakReserved = max(out.PeakReserved, r)
	}
	live := map[int64]Event{}
	for _, e := range s.Trace[:out.PeakEvent+1] {
		switch e.Action {
		case Alloc:
			live[e.Addr] = e
		case FreeRequested:
			delete(live, e.Addr)
		}
	}
	for _, e := range live {
		out.AtPeak = keepLargest(out.AtPeak, Allocation{Size: e.Size, Where: where(e.Frames)})
	}
	return out
}

// keepLargest adds a to the topN largest of as.
func keepLargest(as []Allocation, a Allocation) []Allocation {
	as = append(as, a)
	sort.SliceStable(as, func(i, j int) bool {
		return as[i].Size > as[j].Size || as[i].Size == as[j].Size && as[i].Where < as[j].Where
	})
	if len(as) > topN {
		as = as[:topN]
	}
	return as
}

// maxFrames is how many frames, innermost first, where shows of a
// measured allocation's Python stack.
const maxFrames = 4

// where describes frames: "tensor · module · phase" for memsh's, the
// innermost few of a Python stack.
func where(fs []Frame) string {
	if _, phase, ok := memshFrames(fs); ok {
		return fs[0].Name + " · " + fs[0].Filename + " · " + phase
	}
	var parts []string
	for i, f := range fs {
		if i == maxFrames {
			parts = append(parts, fmt.Sprintf("… %d more frames", len(fs)-maxFrames))
			break
		}
		switch {
		case f.Filename != "" && f.Line > 0:
			parts = append(parts, fmt.Sprintf("%s (%s:%d)", f.Name, f.Filename, f.Line))
		case f.Filename != "":
			parts = append(parts, f.Name, f.Filename)
		default:
			parts = append(parts, f.Name)
		}
	}
	if len(parts) == 0 {
		return "(no frames)"
	}
	return strings.Join(parts, " · ")
}

type sizeCount struct {
	n     int
	where []string
}

// sizeCounts counts the allocations of each size, with a few places.
func sizeCounts(s *Snapshot) map[int64]sizeCount {
	out := map[int64]sizeCount{}
	for _, e := range s.Trace {
		if e.Action != Alloc {
			continue
		}
		c := out[e.Size]
		c.n++
		if w := moduleOf(e.Frames); len(c.where) < 3 && !contains(c.where, w) {
			c.where = append(c.where, w)
		}
		out[e.Size] = c
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// moduleOf is the module and phase an event's frames name: memsh's frames
// are [tensor, module path (op), phase]; other frames are shown whole.
func moduleOf(fs []Frame) string {
	if m, ph, ok := memshFrames(fs); ok {
		return foldIndices(m) + " (" + ph + ")"
	}
	return where(fs)
}

// foldIndices folds a module path's numeric segments: layers.5.mlp is
// layers.*.mlp, so that blocks add up.
func foldIndices(p string) string {
	segs := strings.Split(p, ".")
	for i, s := range segs {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			segs[i] = "*"
		}
	}
	return strings.Join(segs, ".")
}

// moduleDiffs sums the bytes each module allocates per phase on both
// sides, when both sides' frames name modules.
func moduleDiffs(measured, predicted *Snapshot) []ModuleDiff {
	type key struct{ module, phase string }
	sum := func(s *Snapshot) (map[key]int64, bool) {
		out := map[key]int64{}
		named := false
		for _, e := range s.Trace {
			if e.Action != Alloc {
				continue
			}
			m, ph, ok := memshFrames(e.Frames)
			if !ok {
				continue
			}
			named = true
			out[key{foldIndices(m), ph}] += e.Size
		}
		return out, named
	}
	ms, mok := sum(measured)
	ps, pok := sum(predicted)
	if !mok || !pok {
		return nil
	}
	keys := map[key]bool{}
	for k := range ms {
		keys[k] = true
	}
	for k := range ps {
		keys[k] = true
	}
	var out []ModuleDiff
	for k := range keys {
		if ms[k] != ps[k] {
			out = append(out, ModuleDiff{Module: k.module, Phase: k.phase, Measured: ms[k], Predicted: ps[k]})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := abs(out[i].Measured-out[i].Predicted), abs(out[j].Measured-out[j].Predicted)
		return a > b || a == b && out[i].Module+out[i].Phase < out[j].Module+out[j].Phase
	})
	return out
}

// unmatched lists what the measured trace holds that memsh does not model.
func unmatched(s *Snapshot) []string {
	actions := map[string]int{}
	allocated := map[int64]bool{}
	var before int64
	var nBefore int
	for _, e := range s.Trace {
		switch e.Action {
		case Alloc:
			allocated[e.Addr] = true
		case FreeCompleted:
			if !allocated[e.Addr] {
				before += e.Size
				nBefore++
			}
			delete(allocated, e.Addr)
		case FreeRequested, SegmentAlloc, SegmentFree, SegmentMap, SegmentUnmap, OOM:
		default:
			actions[e.Action]++
		}
	}
	var out []string
	if nBefore > 0 {
		out = append(out, fmt.Sprintf("%d frees (%s) of blocks allocated before the trace began", nBefore, units.FormatBytes(before)))
	}
	names := make([]string, 0, len(actions))
	for a := range actions {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		out = append(out, fmt.Sprintf("%d %q events (not modelled)", actions[a], a))
	}
	return out
}

// Render writes the comparison as text.
func (c *Comparison) Render(w io.Writer) error {
	var b strings.Builder
	pct := func(m, p int64) string {
		if m == 0 {
			return ""
		}
		return fmt.Sprintf(" (%+.1f%%)", 100*float64(p-m)/float64(m))
	}
	fmt.Fprintf(&b, "%-16s %14s %14s\n", "", "measured", "memsh")
	fmt.Fprintf(&b, "%-16s %14s %14s%s\n", "peak allocated", units.FormatBytes(c.Measured.PeakAllocated), units.FormatBytes(c.Predicted.PeakAllocated), pct(c.Measured.PeakAllocated, c.Predicted.PeakAllocated))
	reserved := func(s Side) string {
		if !s.Segments && s.PeakReserved == 0 {
			return "not recorded"
		}
		return units.FormatBytes(s.PeakReserved)
	}
	fmt.Fprintf(&b, "%-16s %14s %14s%s\n", "peak reserved", reserved(c.Measured), reserved(c.Predicted), pct(c.Measured.PeakReserved, c.Predicted.PeakReserved))
	fmt.Fprintf(&b, "%-16s %14d %14d\n", "allocations", c.Measured.Allocs, c.Predicted.Allocs)
	if c.Measured.BeforeTrace > 0 || c.Predicted.BeforeTrace > 0 {
		fmt.Fprintf(&b, "%-16s %14s %14s\n", "before the trace", units.FormatBytes(c.Measured.BeforeTrace), units.FormatBytes(c.Predicted.BeforeTrace))
	}
	list := func(title string, as []Allocation) {
		fmt.Fprintf(&b, "\n%s:\n", title)
		for _, a := range as {
			fmt.Fprintf(&b, "  %12s  %s\n", units.FormatBytes(a.Size), a.Where)
		}
	}
	list("live at the measured peak", c.Measured.AtPeak)
	list("live at memsh's peak", c.Predicted.AtPeak)
	list("largest measured allocations", c.Measured.Largest)
	list("largest memsh allocations", c.Predicted.Largest)
	if len(c.Modules) > 0 {
		fmt.Fprintf(&b, "\nbytes allocated by module and phase, where they differ:\n")
		for _, m := range c.Modules[:min(len(c.Modules), 10)] {
			d := m.Measured - m.Predicted
			verb := "missed"
			if d < 0 {
				verb, d = "invented", -d
			}
			fmt.Fprintf(&b, "  %-40s %-10s measured %10s  memsh %10s  (%s %s)\n", m.Module, m.Phase,
				units.FormatBytes(m.Measured), units.FormatBytes(m.Predicted), verb, units.FormatBytes(d))
		}
	}
	if len(c.Sizes) > 0 {
		fmt.Fprintf(&b, "\nallocation sizes whose counts differ:\n")
		for _, s := range c.Sizes[:min(len(c.Sizes), 10)] {
			verb := "missed"
			if s.Bytes() < 0 {
				verb = "invented"
			}
			fmt.Fprintf(&b, "  %12s  measured %d x, memsh %d x (%s %s): %s\n", units.FormatBytes(s.Size), s.Measured, s.Predicted,
				verb, units.FormatBytes(abs(s.Bytes())), strings.Join(s.Examples, "; "))
		}
	}
	if len(c.Sizes) == 0 {
		fmt.Fprintf(&b, "\nevery allocation size comes as often on both sides\n")
	}
	for _, u := range c.Unmatched {
		fmt.Fprintf(&b, "\nnot compared: %s\n", u)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
