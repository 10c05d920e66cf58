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
		// ep=2: 2 ranks x 16 copies over 4 experts; this rank holds 2
		{"ep balanced", MoE{Experts: 4, TopK: 2}, 8, 2, []int64{8, 8}},
		// 2 x 7 x 2 = 28 over 4 experts: 7 each
		{"ep remainder", MoE{Experts: 4, TopK: 2}, 7, 2, []int64{7, 7}},
		// 5 x 1 = 5 copies over 4 experts
		{"top-1 remainder", MoE{Experts: 4, TopK: 1}, 5, 1, []int64{2, 1, 1, 1}},
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

// TestGemma4MoEGated: Gemma 4's experts are always gated
// (Gemma4TextExperts splits gate_up_proj), so a plain activation is
// refused (review_s26: gemma4_moe(act="relu") built ungated experts).
func TestGemma4MoEGated(t *testing.T) {
	for _, tc := range []struct {
		act string
		ok  bool
	}{{"geglu", true}, {"swiglu", true}, {"relu", false}, {"gelu", false}} {
		err := (&Gemma4MoE{Dim: 64, Hidden: 32, Experts: 4, TopK: 2, Act: tc.act}).Validate("experts")
		if (err == nil) != tc.ok {
			t.Errorf("act %q: %v", tc.act, err)
		}
	}
}
