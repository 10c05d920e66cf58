package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestInputGradWithoutCheckpoint: checkpoint("none", input_requires_grad
// = True) is enable_input_require_grads without checkpointing (Axolotl
// calls it for every adapter): the embedding's output requires grad, so
// up, the first linear after it (frozen, with a LoRA adapter on tinyLM),
// computes its input's gradient: the dX GEMM of up (2 x 64 x 512 x 256 =
// 16,777,216 FLOPs) and of its adapter's lora_A (2 x 64 x 4 x 256 =
// 131,072) join the step's model FLOPs.
func TestInputGradWithoutCheckpoint(t *testing.T) {
	run := func(inputGrad bool) float64 {
		p := tinyPlan(t, tinyLM())
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"up"}}
		p.Checkpoint = core.Checkpoint{Mode: "none", InputGrad: inputGrad}
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r.FLOPs.Model
	}
	if d := run(true) - run(false); d != 16_777_216+131_072 {
		t.Errorf("input_requires_grad adds %.0f model FLOPs, want %d", d, 16_777_216+131_072)
	}
}
