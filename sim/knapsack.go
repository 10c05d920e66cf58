package sim

import "sort"

// The exact multiple-choice knapsack of the checkpoint budget solver: each
// block takes exactly one option, each option has a weight (bytes kept
// for backward) and a cost (recompute seconds); the answer to every
// budget is a point of the Pareto front of total weight against total
// cost. The front is built block by block: the sums of the front so far
// with each option of the next block, keeping only the points no other
// point beats in both weight and cost. A partial sum dominated by another
// stays dominated whatever the later blocks add (the same options are
// added to both), so pruning never loses an optimum: the front is exact.
// Its size is bounded by the distinct weights; for identical blocks with
// k options it is at most the number of ways to count blocks per option.

// frontPoint is a choice of one option per block and its totals.
type frontPoint struct {
	bytes  int64
	secs   float64
	choice []int // option of each block
}

// step is a point of the front after some blocks: its totals, the point
// of the previous front it extends and the option it adds.
type step struct {
	bytes     int64
	secs      float64
	prev, opt int
}

// paretoFront is the exact Pareto front of the blocks' options, least
// weight first (and so most cost first).
func paretoFront(c *blockCosts) []frontPoint {
	fronts := [][]step{{{prev: -1, opt: -1}}}
	for b := range c.bytes {
		last := fronts[len(fronts)-1]
		next := make([]step, 0, len(last)*len(c.bytes[b]))
		for i, p := range last {
			for o := range c.bytes[b] {
				next = append(next, step{bytes: p.bytes + c.bytes[b][o], secs: p.secs + c.secs[b][o], prev: i, opt: o})
			}
		}
		fronts = append(fronts, prune(next))
	}
	final := fronts[len(fronts)-1]
	out := make([]frontPoint, len(final))
	for i, p := range final {
		choice := make([]int, len(c.bytes))
		at := i
		for b := len(c.bytes); b > 0; b-- {
			s := fronts[b][at]
			choice[b-1], at = s.opt, s.prev
		}
		out[i] = frontPoint{bytes: p.bytes, secs: p.secs, choice: choice}
	}
	return out
}

// prune keeps the points no other beats: sorted by weight, then cost, a
// point stays when it costs less than every lighter one. Among equal
// points the first made stays (the lower option: less checkpointing).
func prune(pts []step) []step {
	sort.SliceStable(pts, func(i, j int) bool {
		if pts[i].bytes != pts[j].bytes {
			return pts[i].bytes < pts[j].bytes
		}
		return pts[i].secs < pts[j].secs
	})
	out := pts[:0]
	for _, p := range pts {
		if len(out) > 0 && p.secs >= out[len(out)-1].secs {
			continue // a lighter or equal point costs no more
		}
		out = append(out, p)
	}
	return out
}
