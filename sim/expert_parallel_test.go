package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// moeStack is two MoE blocks (dim 512, expert hidden 1024, 8 SwiGLU
// experts, top-2) over a [b, s, 512] input.
func moeStack() *core.Model {
	moe := &nn.MoE{Dim: 512, Hidden: 1024, Experts: 8, TopK: 2, Act: "swiglu"}
	return &core.Model{Name: "moe", Layers: []core.Layer{&core.Repeat{N: 2, Layer: moe}}, Loss: "mse", InputDim: 512}
}

// TestExpertLoadSizesTheAllToAll: each rank routes its 8 tokens to 2
// experts, 16 rows of 512 bf16 values (16 KiB). Balanced, both
// all-to-alls carry 16 rows each way, forward and backward: 4 x 16 KiB
// per block. With expert_load=2 the busiest rank receives 32 rows in the
// dispatch and sends them back in the combine: an all-to-all counts the
// larger of what the rank sends and receives (it ends when the busiest
// rank is done), so both carry twice as much. Dropless
// routing's worst case is ep x min(top_k, experts/ep) / top_k balanced
// shares: 2 at ep=2, 4 at ep=4 (2 experts per rank).
func TestExpertLoadSizesTheAllToAll(t *testing.T) {
	row := int64(512 * 2)
	for _, tc := range []struct {
		par  core.Parallelism
		load int64
	}{
		{core.Parallelism{DP: 2, EP: 2}, 1},
		{core.Parallelism{DP: 2, EP: 2, ExpertLoad: 2}, 2},
		{core.Parallelism{DP: 2, EP: 2, ExpertWorst: true}, 2},
		{core.Parallelism{DP: 4, EP: 4, ExpertWorst: true}, 4},
		{core.Parallelism{DP: 4, EP: 4, ExpertLoad: 1.5}, 0}, // 24 rows
	} {
		r := evalPlan(t, distPlan(t, moeStack(), "bf16", tc.par))
		var got int64
		for _, c := range r.CommBytes {
			if c.Name == "all_to_all" {
				got = c.Bytes
			}
		}
		dispatch := 16 * tc.load * row
		if tc.load == 0 {
			dispatch = 24 * row
		}
		if want := 2 * 2 * 2 * dispatch; got != want {
			t.Errorf("%s: all_to_all %d bytes per step, want %d", tc.par, got, want)
		}
	}
}

// TestExpertTensorParallel: with expert_tp=tp=2 each expert's hidden size
// is split in two; with expert_tp=1 the experts stay whole. ep=2 leaves 4
// of the 8 experts per rank, each 3 x 512 x 1024 parameters, in bf16,
// beside the two replicated routers (512 x 8).
func TestExpertTensorParallel(t *testing.T) {
	expert, router := int64(3*512*1024), int64(512*8)
	for _, tc := range []struct {
		etp  int64
		want int64 // parameters on one rank
	}{
		{0, 2 * (router + 4*expert/2)},
		{2, 2 * (router + 4*expert/2)},
		{1, 2 * (router + 4*expert)},
	} {
		p := distPlan(t, moeStack(), "bf16", core.Parallelism{DP: 2, EP: 2, TP: 2, SequenceParallel: true, ETP: tc.etp})
		r := evalPlan(t, p)
		if got := r.States.Params / 2; got != tc.want {
			t.Errorf("expert_tp=%d: %d parameters per rank, want %d", tc.etp, got, tc.want)
		}
	}
}

// TestExpertErrors: impossible expert layouts.
func TestExpertErrors(t *testing.T) {
	for _, tc := range []struct {
		par  core.Parallelism
		want string
	}{
		{core.Parallelism{DP: 2, EP: 2, TP: 4, ETP: 2, SequenceParallel: true}, "expert_tp=2 must be 1 or tp=4"},
		{core.Parallelism{DP: 2, EP: 2, TP: 2, ETP: 1}, "expert_tp=1 with tp > 1 needs sequence_parallel=True"},
		{core.Parallelism{DP: 2, EP: 2, ExpertLoad: 0.5}, "expert_load must be at least 1"},
		{core.Parallelism{DP: 2, ExpertLoad: 2}, "expert_load needs ep > 1"},
		{core.Parallelism{DP: 2, EP: 2, ExpertLoad: 3}, "expert_load=3 exceeds the worst case of 2 balanced shares"},
		{core.Parallelism{DP: 2, EP: 2, ExpertSpread: 1}, "expert_spread must be in [0, 1) (got 1)"},
		{core.Parallelism{DP: 2, EP: 2, ExpertSpread: -0.1}, "expert_spread must be in [0, 1) (got -0.1)"},
		{core.Parallelism{DP: 2, EP: 2, ExpertSpread: math.NaN()}, "expert_spread must be in [0, 1) (got NaN)"},
		{core.Parallelism{DP: 2, ExpertSpread: 0.1}, "expert_spread needs ep > 1"},
		{core.Parallelism{DP: 2, EP: 2, ExpertWorst: true, ExpertSpread: 0.1}, "expert_spread=0.1 draws up to 2.2 balanced shares, past the worst case of 2"},
		{core.Parallelism{DP: 2, EP: 2, ExpertLoad: 1.5, ExpertSpread: 0.5}, "expert_spread=0.5 draws up to 2.25 balanced shares, past the worst case of 2"},
	} {
		if err := distPlan(t, moeStack(), "bf16", tc.par).Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.par, err, tc.want)
		}
	}
}

// TestExpertSpreadNeedsDropless: a capacity factor pads every expert to
// its capacity, so the rows the replay would vary do not change size;
// expert_spread there would change nothing and is refused.
func TestExpertSpreadNeedsDropless(t *testing.T) {
	m := moeStack()
	m.Layers[0].(*core.Repeat).Layer.(*nn.MoE).Capacity = 1.25
	err := distPlan(t, m, "bf16", core.Parallelism{DP: 2, EP: 2, ExpertSpread: 0.1}).Validate()
	if err == nil || !strings.Contains(err.Error(), "pads every expert to capacity=1.25") {
		t.Errorf("error %v, want the capacity refusal", err)
	}
	if err := distPlan(t, moeStack(), "bf16", core.Parallelism{DP: 2, EP: 2, ExpertSpread: 0.1}).Validate(); err != nil {
		t.Errorf("dropless with expert_spread: %v", err)
	}
}
