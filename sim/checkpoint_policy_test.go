package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// TestOpPolicyRecomputesLess: under the op policy a block's backward does
// not run its kept ops again. Against full checkpointing, each block
// recomputes fewer FLOPs by those of q_proj, v_proj and gate_proj (the
// 1st, 3rd and 5th mm) and of the attention kernel, counted by hand for 2
// blocks (h=256, 8 heads of 32, 2 kv heads, SwiGLU 688, b=2, s=64: T=128
// tokens). The policy keeps down_proj (the 7th mm) too, but full
// checkpointing does not run it again either: its input is the block's
// last saved tensor, where torch.utils.checkpoint stops (early stop,
// core.Program.RecomputeEnd).
func TestOpPolicyRecomputesLess(t *testing.T) {
	const T, s, h, kvw, ffn, blocks = 128, 64, 256, 64, 688, 2
	m := testmodels.Llama(h, blocks, 8, 2, ffn, 1000, "sdpa")
	full := evalPlan(t, testmodels.LlamaPlan(m, 2, s, "bf16", "full", "H100-80GB"))
	op := evalPlan(t, testmodels.LlamaPlan(m, 2, s, "bf16", "op", "H100-80GB"))
	kept := 2.0*T*h*h + 2.0*T*h*kvw + 2.0*T*h*ffn + 4.0*T*s*h/2 // q, v, gate; causal attention
	if got := full.FLOPs.Recompute - op.FLOPs.Recompute; got != blocks*kept {
		t.Errorf("op policy recomputes %g FLOPs fewer than full, counted by hand %g", got, blocks*kept)
	}
	if op.Time.StepSeconds >= full.Time.StepSeconds {
		t.Errorf("op policy step %.4g s, not faster than full's %.4g s", op.Time.StepSeconds, full.Time.StepSeconds)
	}
	// The kept outputs are dropped once the step is over: a second policy
	// with nothing to keep (an empty match) holds what full holds.
	nothing := testmodels.LlamaPlan(m, 2, s, "bf16", "full", "H100-80GB")
	nothing.Checkpoint = core.Checkpoint{Mode: "op", Save: []string{"topk"}}
	if r := evalPlan(t, nothing); r.SavedActivations != full.SavedActivations || r.FLOPs.Recompute != full.FLOPs.Recompute {
		t.Errorf("op policy keeping nothing: saved %d, recompute %g; full: %d, %g", r.SavedActivations, r.FLOPs.Recompute, full.SavedActivations, full.FLOPs.Recompute)
	}
}
