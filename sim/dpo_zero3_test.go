package sim

import (
	"maps"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestDPOZeRO3: under ZeRO-3 TRL's prepare_deepspeed (and LLaMA-Factory's)
// initializes the reference copy with the trainer's stage-3 config, so its
// weights are partitioned as the policy's are: the copy adds exactly the
// policy's partitioned parameters (the same shapes and dtype; the small
// Llama ties none), it is gathered module by module in its forward and
// never in the backward (it runs under no_grad).
func TestDPOZeRO3(t *testing.T) {
	plan := func(ref string) *core.Plan {
		p := dpoPlan(ref, core.TRLLogits)
		p.Parallel = core.Parallelism{DP: 4, Zero: 3}
		return p
	}
	pre := evalPlan(t, plan(core.RefPrecomputed))
	r, err := Evaluate(plan(core.RefModel), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.States.Params != 2*pre.States.Params {
		t.Errorf("params %d with the reference copy, %d without: want twice", r.States.Params, pre.States.Params)
	}
	var fwd, bwd int
	for _, e := range r.Trace.SteadyEvents() {
		if !strings.HasPrefix(e.Op, "ref_model.") || e.Action != "alloc" {
			continue
		}
		switch e.Phase {
		case replay.PhaseForward:
			fwd++
		case replay.PhaseBackward:
			bwd++
		}
	}
	if fwd == 0 || bwd != 0 {
		t.Errorf("the reference's allocations: %d in the forward, %d in the backward; want some, none", fwd, bwd)
	}
}

// TestDPOZeRO3FusedHead: TRL 1.15's fused LM head reads lm_head.weight
// outside lm_head's forward, so under ZeRO-3 TRL gathers it itself
// (maybe_gather_lm_head_ctx, trl/trainer/utils.py at 1.15.0 and 1.16.0:
// deepspeed.zero.GatheredParameters around _ChunkedLogProbFunction) and
// again in that function's backward, which recomputes the tiles
// (trl/kernels/chunked_logprob.py). The policy's head (32,000 x 512 in
// bf16: 32,768,000 bytes) is gathered once in the forward and once in the
// backward, the reference copy's once in its forward.
func TestDPOZeRO3FusedHead(t *testing.T) {
	p := dpoPlan(core.RefModel, core.TRLFusedHead)
	p.Parallel = core.Parallelism{DP: 4, Zero: 3}
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		tensor string
		phase  replay.Phase
	}
	got := map[key]int{}
	for _, e := range r.Trace.SteadyEvents() {
		if e.Action == "alloc" && (e.Tensor == "lm_head gathered" || e.Tensor == core.RefCopy+".lm_head gathered") {
			got[key{e.Tensor, e.Phase}]++
			if e.Size != 32_768_000 {
				t.Errorf("%s: %d B, want 32,768,000", e.Tensor, e.Size)
			}
		}
	}
	want := map[key]int{
		{"lm_head gathered", replay.PhaseForward}:                 1,
		{"lm_head gathered", replay.PhaseBackward}:                1,
		{core.RefCopy + ".lm_head gathered", replay.PhaseForward}: 1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("the heads' gathers %v, want %v", got, want)
	}
}
