package advise

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// Why a candidate helps and what it costs, read off its report and the
// plan's: which terms of the memory breakdown at the peak shrink, how much
// less is saved for backward, whether the largest allocation shrinks,
// where it now fails, what moves to host memory; and which terms of the
// step time grow or shrink. Nothing is estimated: each figure is the
// difference of two replays.

// maxClauses is how many facts a why or cost names.
const maxClauses = 3

// explain says why rep (a candidate) helps and what it costs: for goal
// Fit, the memory it saves and the time it costs; for goal Speed, the
// time it saves and the memory it costs.
func explain(base, rep *replay.Report, goal Goal) (why, cost string) {
	mem, tm := memoryTerms(base, rep), timeCost(base.Time, rep.Time)
	if goal == Speed {
		return tm, mem
	}
	return mem, tm
}

// memoryTerms names what shrinks in memory (or, when nothing does, how
// device use moves).
func memoryTerms(base, rep *replay.Report) string {
	small := max(base.Capacity/200, 16<<20) // half a percent of the card: below it, a term has not moved
	var clauses []string
	if o := rep.OOM; o != nil && (base.OOM == nil || o.Alloc.Tensor != base.OOM.Alloc.Tensor || o.Alloc.Phase != base.OOM.Alloc.Phase) {
		clauses = append(clauses, fmt.Sprintf("now fails at %s in %s", o.Alloc.Tensor, o.Alloc.Phase)) // first: where it stands
	}
	type delta struct {
		name string
		d    int64
	}
	var ds []delta
	for _, s := range base.Breakdown {
		if d := rep.Category(s.Name) - s.Bytes; d <= -small {
			ds = append(ds, delta{s.Name, d})
		}
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].d < ds[j].d })
	for i, d := range ds {
		if i == 2 {
			break
		}
		clauses = append(clauses, fmt.Sprintf("%s %s", d.name, signedBytes(d.d)))
	}
	if d := rep.SavedActivations - base.SavedActivations; d <= -small {
		clauses = append(clauses, "saved for backward "+signedBytes(d))
	}
	if b, r := base.Largest, rep.Largest; r.Bytes*10 < b.Bytes*9 {
		clauses = append(clauses, fmt.Sprintf("largest allocation %s -> %s", units.FormatBytes(b.Bytes), units.FormatBytes(r.Bytes)))
	}
	if d := rep.HostMemory - base.HostMemory; d >= small || d <= -small { // per GPU; less of it is what a plan short of host memory needs
		clauses = append(clauses, "host memory "+signedBytes(d))
		if g := rep.DeviceUsed - base.DeviceUsed; d < 0 && g >= small { // an offload taken back: the GPU holds what the host held
			clauses = append(clauses, "device used "+signedBytes(g))
		}
	}
	if len(clauses) > maxClauses {
		clauses = clauses[:maxClauses]
	}
	if len(clauses) == 0 {
		clauses = append(clauses, "device used "+signedBytes(rep.DeviceUsed-base.DeviceUsed))
	}
	return strings.Join(clauses, "; ")
}

// timeCost names the step-time terms that move by more than 1 % of the
// step, largest first.
func timeCost(base, rep replay.TimeEstimate) string {
	seconds := func(t replay.TimeEstimate, name string) float64 {
		for _, s := range t.Breakdown {
			if s.Name == name {
				return s.Seconds
			}
		}
		return 0
	}
	var names []string
	seen := map[string]bool{}
	for _, t := range []replay.TimeEstimate{base, rep} {
		for _, s := range t.Breakdown {
			if !seen[s.Name] {
				seen[s.Name] = true
				names = append(names, s.Name)
			}
		}
	}
	type delta struct {
		name string
		d    float64
	}
	var ds []delta
	for _, n := range names {
		if d := seconds(rep, n) - seconds(base, n); math.Abs(d) > 0.01*base.StepSeconds {
			ds = append(ds, delta{n, d})
		}
	}
	sort.SliceStable(ds, func(i, j int) bool { return math.Abs(ds[i].d) > math.Abs(ds[j].d) })
	var parts []string
	for i, d := range ds {
		if i == maxClauses {
			break
		}
		parts = append(parts, d.name+" "+signedSeconds(d.d))
	}
	return strings.Join(parts, ", ")
}

// signedBytes is n bytes with its sign: "+1.50 GiB", "-37.66 GiB".
func signedBytes(n int64) string {
	if n >= 0 {
		return "+" + units.FormatBytes(n)
	}
	return units.FormatBytes(n)
}

// signedSeconds is s seconds with its sign, to three figures: "+112 ms".
func signedSeconds(s float64) string {
	sign := "+"
	if s < 0 {
		sign, s = "-", -s
	}
	switch {
	case s >= 1:
		return fmt.Sprintf("%s%.3g s", sign, s)
	case s >= 1e-3:
		return fmt.Sprintf("%s%.3g ms", sign, s*1e3)
	}
	return fmt.Sprintf("%s%.3g µs", sign, s*1e6)
}
