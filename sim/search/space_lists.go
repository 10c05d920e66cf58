package search

import (
	"fmt"
	"slices"

	"github.com/memsh/memsh/sim/units"
)

// checkLists refuses a list of the space that names a value twice. Each
// value of a list is one choice of its dimension: a repeated one made
// every layout with it twice, so that search(tp=[2, 2]) counted 760
// layouts explored where tp=[2] counts 380 and listed the same layout in
// two rows, one on the front and one not.
func (sp Space) checkLists() error {
	ints := []struct {
		name string
		vals []int64
	}{{"tp", sp.TP}, {"pp", sp.PP}, {"cp", sp.CP}, {"ep", sp.EP}, {"expert_tp", sp.ExpertTP},
		{"micro_batch", sp.MicroBatch}, {"virtual_stages", sp.Virtual}}
	for _, l := range ints {
		if v, ok := repeated(l.vals); ok {
			return listRepeats(l.name, fmt.Sprint(v))
		}
	}
	strs := []struct {
		name string
		vals []string
	}{{"sharding", sp.Sharding}, {"cp_mode", sp.CPModes}, {"checkpoint", sp.Checkpoint}, {"offload", sp.Offload}}
	for _, l := range strs {
		if v, ok := repeated(l.vals); ok {
			return listRepeats(l.name, fmt.Sprintf("%q", v))
		}
	}
	return nil
}

// repeated is the first value of vals seen before, if any.
func repeated[T comparable](vals []T) (T, bool) {
	seen := make(map[T]bool, len(vals))
	for _, v := range vals {
		if seen[v] {
			return v, true
		}
		seen[v] = true
	}
	var zero T
	return zero, false
}

func listRepeats(name, value string) error {
	return &units.Error{Path: "search", Msg: fmt.Sprintf("%s lists %s twice", name, value),
		Hint: "each value of a list is one choice of the space: list it once"}
}

// checkIdleLists refuses a list that no layout of the space reads: a
// virtual_stages list with more than one chunk where every pp of the pp
// list is 1 (interleaving needs pipeline stages), a cp_mode list where
// every cp of the cp list is 1 (one rank holds the whole sequence). Run
// with either, the search ignored the list and said nothing.
func (sp Space) checkIdleLists() error {
	all1 := func(l []int64) bool { return l != nil && !slices.ContainsFunc(l, func(n int64) bool { return n != 1 }) }
	if all1(sp.PP) && slices.ContainsFunc(sp.Virtual, func(v int64) bool { return v > 1 }) {
		return &units.Error{Path: "search", Msg: fmt.Sprintf("virtual_stages=%s: model chunks per GPU need pipeline stages, and pp=%s", spaceList(sp.Virtual), spaceList(sp.PP)),
			Hint: "add a pp above 1 (pp=[1, 2, 4]), or leave virtual_stages out"}
	}
	if all1(sp.CP) && sp.CPModes != nil {
		return &units.Error{Path: "search", Msg: fmt.Sprintf("cp_mode=%s: context parallelism's attention needs cp above 1, and cp=%s", starList(sp.CPModes), spaceList(sp.CP)),
			Hint: "add a cp above 1 (cp=[1, 2]), or leave cp_mode out"}
	}
	return nil
}
