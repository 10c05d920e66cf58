package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestKeepLogitsNext counts keep_logits="next" by hand (a loop whose
// output is rebound when the next micro-batch's forward returns,
// OpenRLHF's SFT loop) on a small Llama, 2 rows of 1,024 tokens, V =
// 32,000, bf16: the logits B = 2 x 1,024 x 32,000 x 2 = 131,072,000
// bytes. The micro-batch before's logits (B) are made before the forward
// and go at its end; this micro-batch's stay through the backward and
// the optimizer step, freed as the step ends. keep_logits=True frees
// them before the optimizer step and holds none from before.
func TestKeepLogitsNext(t *testing.T) {
	const b = 131_072_000
	for _, next := range []bool{false, true} {
		m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
		p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "H100-80GB")
		p.KeepLogits, p.KeepLogitsNext = true, next
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		before, end := []int64(nil), []int64(nil)
		if next {
			before, end = []int64{b}, []int64{-b}
		}
		checkOpEvents(t, r.Trace, []opEventCase{
			{"logits_before", replay.PhaseForward, before},
			{"end of forward", replay.PhaseForward, end},
		})
		opt := opEvents(r.Trace, "optimizer.step", replay.PhaseOptimizer)
		if held := len(opt) > 0 && opt[len(opt)-1] == -b; held != next {
			t.Errorf("next=%v: the logits held to the step's end: %v (optimizer events %v)", next, held, opt)
		}
	}
}
