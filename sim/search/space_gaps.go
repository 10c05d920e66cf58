package search

import (
	"fmt"
	"slices"
	"strings"
)

// spaceGaps counts the combinations of degrees enumerate passes over
// before they make a layout, by cause, with the values that caused it,
// so that a space with few layouts or none says why (Stats.Skipped): a
// global batch of one sequence on 8 GPUs has no data-parallel degree
// below 8 that divides it, and a tp=[1, 2, 4] search of it has no
// layout at all.
type spaceGaps struct {
	gpus     gap // tp x cp x pp does not divide the GPUs: the products
	noBlocks gap // pp > 1 on a model without repeated blocks: the pp
	batch    gap // dp does not divide the global batch: the dp
	micro    gap // no micro_batch of the list divides a replica's sequences: their counts
	stages   gap // no virtual_stages of the list splits the blocks over pp: the pp
	experts  gap // no expert_tp of the list at this tp: the tp
	sharding gap // no sharding of the list (hsdp: no replicas x shards split) at this dp x cp: the dp
}

// gap is one cause's skipped combinations and its distinct values.
type gap struct {
	n      int
	values []int64
}

// add counts one combination skipped with value v.
func (g *gap) add(v int64) {
	g.n++
	if !slices.Contains(g.values, v) {
		g.values = append(g.values, v)
	}
}

// reasons lists the causes, most combinations first (Stats.Skipped).
func (gs *spaceGaps) reasons(sp Space) []Reason {
	blocks := "pipeline stages split the model's repeated blocks; this model has none (pp=1 only)"
	causes := []struct {
		g   gap
		why func(vals string) string
	}{
		{gs.gpus, func(v string) string { return fmt.Sprintf("tp x cp x pp = %s does not divide the %d GPUs", v, sp.GPUs) }},
		{gs.noBlocks, func(v string) string { return fmt.Sprintf("pp=%s: %s", v, blocks) }},
		{gs.batch, func(v string) string {
			return fmt.Sprintf("dp = gpus / (tp x cp x pp) = %s does not divide the global batch of %s", v, sequences(sp.GlobalBatch))
		}},
		{gs.micro, func(v string) string {
			return fmt.Sprintf("no micro_batch of %s divides the sequences of a data-parallel replica (%s)", spaceList(sp.MicroBatch), v)
		}},
		{gs.stages, func(v string) string {
			return fmt.Sprintf("pp=%s: no virtual_stages of %s splits the model's blocks over the stages", v, spaceList(sp.Virtual))
		}},
		{gs.experts, func(v string) string {
			return fmt.Sprintf("tp=%s: no expert_tp of %s is 1 or tp", v, spaceList(sp.ExpertTP))
		}},
		{gs.sharding, func(v string) string {
			return fmt.Sprintf("dp=%s: no sharding of %s runs there (hsdp needs more than one replica and more than one shard; offload= adds layouts to some shardings only)", v, starList(sp.Sharding))
		}},
	}
	var out []Reason
	for _, c := range causes {
		if c.g.n > 0 {
			out = append(out, Reason{Why: c.why(valueList(c.g.values)), Count: c.g.n})
		}
	}
	slices.SortStableFunc(out, func(a, b Reason) int { return b.Count - a.Count })
	return out
}

// valueList writes vs sorted, "4" or "2, 4 and 8", the first six and a
// count of the rest past them.
func valueList(vs []int64) string {
	vs = slices.Clone(vs)
	slices.Sort(vs)
	var more int
	if len(vs) > 6 {
		vs, more = vs[:6], len(vs)-6
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	switch {
	case more > 0:
		return strings.Join(s, ", ") + fmt.Sprintf(" (and %d more)", more)
	case len(s) > 1:
		return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
	}
	return s[0]
}

// spaceList writes a list of the space ("[1, 2]"), or "the default" for
// none given.
func spaceList(vs []int64) string {
	if vs == nil {
		return "the default"
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// sequences writes n sequences ("1 sequence", "8 sequences").
func sequences(n int64) string {
	if n == 1 {
		return "1 sequence"
	}
	return fmt.Sprintf("%d sequences", n)
}
