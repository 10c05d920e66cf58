package search

import (
	"fmt"

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
