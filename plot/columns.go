package plot

import (
	"sort"

	"github.com/memsh/memsh/sim/replay"
)

// column is one x position of a chart, standing for a run of consecutive
// timeline events: the event with the most allocated memory among them
// (so spikes survive downsampling), and the most reserved memory among
// them.
type column struct {
	first, last int          // event indexes covered, inclusive
	at          int          // index of the representative event
	pt          replay.Point // the representative event
	reserved    int64        // the highest reserved figure in the run
}

// minPhaseShare is the least share of a chart's width a major phase gets
// (when there are few phases): the optimizer step is a handful of events
// among thousands, and would otherwise vanish.
const minPhaseShare = 0.05

// columns lays tl out in n columns of equal width. Each major phase
// (setup, forward, backward with its recomputation, optimizer) gets a
// share of the columns in proportion to its events, but at least
// minPhaseShare of them; within a phase, column i of c covers events
// [i*e/c, (i+1)*e/c), so a phase with fewer events than columns repeats
// them (memory is constant between events).
func columns(tl []replay.Point, n int) []column {
	cols, _ := layout(tl, n)
	return cols
}

// layout is columns, also saying whether a phase was widened beyond its
// share of the events.
func layout(tl []replay.Point, n int) (cols []column, widened bool) {
	if n <= 0 || len(tl) == 0 {
		return nil, false
	}
	var segs [][2]int // event ranges [lo, hi) of the major phases
	for i, p := range tl {
		if i == 0 || majorPhase(p.Phase) != majorPhase(tl[i-1].Phase) {
			segs = append(segs, [2]int{i, i + 1})
		} else {
			segs[len(segs)-1][1] = i + 1
		}
	}
	share := phaseShares(segs, len(tl))
	for k, s := range segs {
		widened = widened || share[k] > float64(s[1]-s[0])/float64(len(tl))+1e-9
	}
	width := widths(share, n)
	var out []column
	for k, s := range segs {
		c := width[k]
		e := s[1] - s[0]
		for i := 0; i < c; i++ {
			lo := s[0] + i*e/c
			hi := max(lo+1, s[0]+(i+1)*e/c)
			col := column{first: lo, last: hi - 1, at: lo}
			for j := lo; j < hi; j++ {
				if tl[j].Allocated > tl[col.at].Allocated {
					col.at = j
				}
				col.reserved = max(col.reserved, tl[j].Reserved)
			}
			col.pt = tl[col.at]
			out = append(out, col)
		}
	}
	return out, widened
}

// widths splits n columns among segments by their shares: each share of
// n rounded down (at least one column), then the columns left over one
// each to the largest remainders, so that they add up to n (rounding each
// share to nearest could make n-1 or n+1); when the one-column floors take
// more than n, columns come back from the widest segments. More segments
// than columns get one each.
func widths(share []float64, n int) []int {
	w := make([]int, len(share))
	rem := make([]float64, len(share))
	order := make([]int, len(share))
	left := n
	for k, s := range share {
		x := s * float64(n)
		w[k] = max(1, int(x))
		rem[k] = x - float64(int(x))
		left -= w[k]
		order[k] = k
	}
	sort.SliceStable(order, func(i, j int) bool { return rem[order[i]] > rem[order[j]] })
	for i := 0; left > 0 && len(order) > 0; i = (i + 1) % len(order) {
		w[order[i]]++
		left--
	}
	for left < 0 {
		widest := 0
		for k := range w {
			if w[k] > w[widest] {
				widest = k
			}
		}
		if w[widest] <= 1 {
			break
		}
		w[widest]--
		left++
	}
	return w
}

// phaseShares gives each segment its share of the width: events/total,
// raised to minPhaseShare (or less when there are many segments), taking
// the difference from the larger segments in proportion to their size.
func phaseShares(segs [][2]int, total int) []float64 {
	floor := min(minPhaseShare, 1/(2*float64(len(segs))))
	share := make([]float64, len(segs))
	raised, rest := 0.0, 0.0
	for k, s := range segs {
		share[k] = float64(s[1]-s[0]) / float64(total)
		if share[k] < floor {
			raised += floor
		} else {
			rest += share[k]
		}
	}
	for k := range share {
		if share[k] < floor {
			share[k] = floor
		} else {
			share[k] *= (1 - raised) / rest
		}
	}
	return share
}

// columnOf returns the index of the column covering event i.
func columnOf(cols []column, i int) int {
	lo, hi := 0, len(cols)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if cols[mid].last < i {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// majorPhase folds recompute into backward: recomputation runs inside the
// backward pass, one checkpointed region at a time.
func majorPhase(p replay.Phase) replay.Phase {
	if p == replay.PhaseRecompute {
		return replay.PhaseBackward
	}
	return p
}

// phaseRun is a maximal run of columns whose representative events share
// a phase.
type phaseRun struct {
	phase      replay.Phase
	first, end int // columns [first, end)
}

// phaseRuns splits cols into runs of equal key(phase).
func phaseRuns(cols []column, key func(replay.Phase) replay.Phase) []phaseRun {
	var runs []phaseRun
	for i, c := range cols {
		k := key(c.pt.Phase)
		if len(runs) > 0 && runs[len(runs)-1].phase == k {
			runs[len(runs)-1].end = i + 1
			continue
		}
		runs = append(runs, phaseRun{phase: k, first: i, end: i + 1})
	}
	return runs
}

// eventOf finds the timeline event that allocated a: the first event in
// a's phase and op whose allocated memory rose by at least a's bytes. It
// returns -1 when there is none (a timeline without that allocation).
func eventOf(tl []replay.Point, a replay.Alloc) int {
	if a.Bytes <= 0 {
		return -1
	}
	var prev int64
	for i, p := range tl {
		if p.Phase == a.Phase && p.Op == a.Op && p.Allocated-prev >= a.Bytes {
			return i
		}
		prev = p.Allocated
	}
	return -1
}

// peakEvent is the first event at the highest allocated memory.
func peakEvent(tl []replay.Point) int {
	at := -1
	var top int64 = -1
	for i, p := range tl {
		if p.Allocated > top {
			at, top = i, p.Allocated
		}
	}
	return at
}
