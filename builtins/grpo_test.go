package builtins

import (
	"errors"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

const grpoPrelude = `
m = model("tiny", embedding(1000, 64), mlp(64, 256), vocab = 1000)
g = grpo(completion = 8, beta = 0.1)
`

// TestGRPOValues holds what a user reads back from grpo() and from a
// plan's preference (docs/grpo.md "Settings"), and the values grpo()
// refuses.
func TestGRPOValues(t *testing.T) {
	runPreludeCases(t, grpoPrelude, []evalCase{
		// .reference is the reference the plan keeps, once train() has its LoRA
		// (GRPOTrainer.__init__: none with beta 0, the adapters disabled under
		// PEFT, else ref_model, a copy).
		{expr: `g.reference`, want: `None`},
		{expr: `train(m, seq = 16, preference = g).preference.reference`, want: `"model"`},
		{expr: `train(m, seq = 16, preference = g, lora = lora()).preference.reference`, want: `"adapters"`},
		{expr: `train(m, seq = 16, preference = grpo(completion = 8)).preference.reference`, want: `"none"`},
		{expr: `train(m, seq = 16, preference = g).replace(lora = lora()).preference.reference`, want: `"adapters"`},
		// The resolved reference is not a setting: the plan's value equals the call.
		{expr: `train(m, seq = 16, preference = g).preference == g`, want: `True`},
		{expr: `train(m, seq = 16, preference = g).preference`, want: `grpo(completion=8, beta=0.1, trl="1.15")`},
		// beta is a finite KL coefficient: inf made a plan whose printed call
		// (beta=+Inf) does not evaluate.
		{expr: `grpo(beta = float("inf"))`, err: `beta must be a finite number`},
		{expr: `grpo(beta = float("nan"))`, err: `beta must be a finite number`},
	})
}

// TestGRPOErrorHints: every value grpo() refuses comes with a hint, its
// types' too (UnpackArgs' errors and grpo()'s own, which had none).
func TestGRPOErrorHints(t *testing.T) {
	eval := starEval(t, grpoPrelude)
	for _, expr := range []string{
		`grpo(completion = "1024")`, `grpo(completion = 1024.0)`, `grpo(beta = "0.1")`, `grpo(vllm = True)`,
		`grpo(vllm = "colocate", vllm_memory = "0.5")`, `grpo(sleep = 1)`, `grpo(trl = 1.15)`, `grpo(foo = 1)`,
		`grpo(beta = -1)`, `grpo(vllm = "Colocate")`, `grpo(steps_per_generation = 0)`, `grpo(generation_batch_size = "64")`,
		`grpo(steps_per_generation = 2, generation_batch_size = 64)`, `grpo(ds3_gather = "no")`,
	} {
		_, err := eval(expr)
		var ue *units.Error
		if !errors.As(err, &ue) || ue.Hint == "" {
			t.Errorf("%s: %v, want an error with a hint", expr, err)
		}
	}
}
