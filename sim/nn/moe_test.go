package nn

import (
	"slices"
	"testing"
)

// loads: the rows of each expert on the replayed rank.
func TestMoELoads(t *testing.T) {
	for _, tc := range []struct {
		name       string
		m          MoE
		tokens, ep int64
		want       []int64
	}{
		// 8 tokens x top-2 = 16 copies over 4 experts
		{"balanced", MoE{Experts: 4, TopK: 2}, 8, 1, []int64{4, 4, 4, 4}},
		// 7 x 2 = 14: two experts get one more
		{"remainder", MoE{Experts: 4, TopK: 2}, 7, 1, []int64{4, 4, 3, 3}},
		// the busiest gets 2 x 4 = 8 (all 8 tokens), the others 8 / 3
		{"imbalance 2", MoE{Experts: 4, TopK: 2, Imbalance: 2}, 8, 1, []int64{8, 3, 3, 2}},
		// 3 x 4 = 12 capped at the 8 tokens (a token picks an expert once)
		{"imbalance capped", MoE{Experts: 4, TopK: 2, Imbalance: 3}, 8, 1, []int64{8, 3, 3, 2}},
		// ep=2: 2 ranks x 16 copies over 4 experts; this rank holds 2
		{"ep balanced", MoE{Experts: 4, TopK: 2}, 8, 2, []int64{8, 8}},
		// busiest 2 x 8 = 16 of 32, the rest 16 / 3 each
		{"ep imbalance", MoE{Experts: 4, TopK: 2, Imbalance: 2}, 8, 2, []int64{16, 6}},
		// capacity 1.25: ceil(1.25 x 16 / 4) = 5 per source rank, padded
		{"capacity", MoE{Experts: 4, TopK: 2, Capacity: 1.25}, 8, 1, []int64{5, 5, 5, 5}},
		{"ep capacity", MoE{Experts: 4, TopK: 2, Capacity: 1.25}, 8, 2, []int64{10, 10}},
	} {
		got, err := tc.m.loads(tc.tokens, tc.ep)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: loads %v, want %v", tc.name, got, tc.want)
		}
	}
}
