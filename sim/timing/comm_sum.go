package timing

import (
	"github.com/memsh/memsh/sim/core"
)

// commSum is n identical collectives.
type CommSum struct {
	Kind, Group string
	Bytes       int64
	Backward    bool
	N           float64
	// Hide is the GEMM time each runs beside (Megatron's asynchronous
	// tensor-parallel backward, tp_overlap.go); 0: exposed whole.
	Hide float64
}

// sumComm adds n times each of recs to sums, merging identical
// collectives, and returns the sums in a fixed order (so that the time
// model adds the same terms in the same order whichever way the
// collectives were counted).
func SumComm(recs []core.CommRecord, sums []CommSum, n float64) []CommSum {
	for _, c := range recs {
		sums = addComm(sums, CommSum{Kind: c.Kind, Group: c.Group, Bytes: c.Bytes, Backward: c.Backward}, n)
	}
	SortComm(sums)
	return sums
}

// addComm adds n times c to sums, merged with an identical collective.
func addComm(sums []CommSum, c CommSum, n float64) []CommSum {
	for i := range sums {
		if s := &sums[i]; s.Kind == c.Kind && s.Group == c.Group && s.Bytes == c.Bytes && s.Backward == c.Backward && s.Hide == c.Hide {
			s.N += n
			return sums
		}
	}
	c.N = n
	return append(sums, c)
}

// sortComm orders collectives by group, kind, direction and size
// (insertion sort: the lists are short).
func SortComm(sums []CommSum) {
	less := func(a, b *CommSum) bool {
		switch {
		case a.Group != b.Group:
			return a.Group < b.Group
		case a.Kind != b.Kind:
			return a.Kind < b.Kind
		case a.Backward != b.Backward:
			return !a.Backward
		case a.Bytes != b.Bytes:
			return a.Bytes < b.Bytes
		}
		return a.Hide < b.Hide
	}
	for i := 1; i < len(sums); i++ {
		for j := i; j > 0 && less(&sums[j], &sums[j-1]); j-- {
			sums[j], sums[j-1] = sums[j-1], sums[j]
		}
	}
}
