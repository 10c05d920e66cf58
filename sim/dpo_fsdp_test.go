package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestDPOFSDP2: under FSDP2 TRL's prepare_fsdp (trl/models/utils.py at
// 1.8.0 and 1.16.0) calls fully_shard once on the whole reference copy,
// with the trainer's reshard_after_forward (accelerate: True) and no
// auto-wrap of its layers (the review of huggingface/trl#6527 says as
// much), so the copy is one FSDP unit: sharded as the policy's weights at
// rest, all-gathered whole at its forward's start, its all-gather output
// kept beside the unsharded parameters until the copy's own root
// post-forward frees it (torch 2.15 _fsdp_state.py _post_forward:
// release_all_gather_state_for_comm_reuse), resharded there, and never
// gathered in the backward (no_grad).
//
// The small Llama (hidden 512, 2 layers, 8 heads of 64, 2 KV heads, MLP
// 1,376, vocabulary 32,000, untied): per layer 2 x 512 (norms) + 512 x
// (512 + 2 x 128 + 512) (attention) + 3 x 512 x 1,376 (MLP) = 2,769,920;
// the embedding and head 2 x 32,000 x 512 = 32,768,000; the final norm
// 512: 38,308,352 parameters. Gathered in bf16 (the plan's bf16 weights):
// 76,616,704 bytes, once as the all-gather output (4 ranks x the
// 19,154,176-element shard) and once as the unsharded parameters.
func TestDPOFSDP2(t *testing.T) {
	plan := func(ref string) *core.Plan {
		p := dpoPlan(ref, core.TRLLogits)
		p.Parallel = core.Parallelism{DP: 4, FSDP: true}
		return p
	}
	pre := evalPlan(t, plan(core.RefPrecomputed))
	r, err := Evaluate(plan(core.RefModel), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.States.Params != 2*pre.States.Params {
		t.Errorf("params %d with the reference copy, %d without: want twice (the copy sharded as the policy)", r.States.Params, pre.States.Params)
	}
	const numel = 2*2_769_920 + 32_768_000 + 512
	const want = 2 * numel // bf16
	var gathers, outputs, bwd int
	freedAt := ""
	for _, e := range r.Trace.SteadyEvents() {
		if !strings.HasPrefix(e.Tensor, core.RefCopy+" ") {
			continue
		}
		switch {
		case e.Phase != replay.PhaseForward && e.Action == "alloc":
			bwd++
		case e.Tensor == core.RefCopy+" unsharded parameters" && e.Action == "alloc":
			gathers++
			if e.Size != want {
				t.Errorf("the reference's unsharded parameters: %d B, want %d (the whole copy in bf16)", e.Size, want)
			}
		case e.Tensor == core.RefCopy+" all-gather output" && e.Action == "alloc":
			outputs++
			if e.Size != want {
				t.Errorf("the reference's all-gather output: %d B, want %d", e.Size, want)
			}
		case e.Tensor == core.RefCopy+" all-gather output" && e.Action == "free_completed":
			freedAt = e.Op
		}
	}
	if gathers != 1 || outputs != 1 || bwd != 0 {
		t.Errorf("the reference copy: %d gathers and %d all-gather outputs in the forward, %d allocations after it; want 1, 1, 0", gathers, outputs, bwd)
	}
	if freedAt != core.RefCopy+".lm_head" {
		t.Errorf("the reference's all-gather output freed at %q, want at its last op %q (its root post-forward)", freedAt, core.RefCopy+".lm_head")
	}
}
