package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
)

// TestStepTemporary hand-counts the optimizer step's transient bytes over
// tensors of 400 B (the largest) and 1,000 B (all of them): fused kernels
// none; the for-loop path exp_avg_sq.sqrt() and its quotient for one
// tensor at a time (2 x 400); foreach the sqrt of every exp_avg_sq at once
// (torch.optim.adamw _multi_tensor_adamw: 1,000). With the step in
// backward every parameter has an optimizer of its own (torchtune's
// optimizer_in_bwd), so the replay passes one tensor's bytes as both:
// foreach then holds that tensor's sqrt alone, and fused still nothing.
// foreach's bytes are a tensor per parameter (each _foreach_sqrt output
// its own empty_like: ATen's native/cuda/ForeachUnaryOp.cu), the others
// one block (TestCUDAGraphPool replays the per-tensor blocks to an OOM).
func TestStepTemporary(t *testing.T) {
	for _, c := range []struct {
		opt            core.Optimizer
		largest, total int64
		want           int64
		perTensor      bool
	}{
		{core.Optimizer{Kind: core.AdamW, Impl: "fused"}, 400, 1000, 0, false},
		{core.Optimizer{Kind: core.AdamW, Impl: "for-loop"}, 400, 1000, 800, false},
		{core.Optimizer{Kind: core.AdamW, Impl: "foreach"}, 400, 1000, 1000, true},
		{core.Optimizer{Kind: core.Adam}, 400, 1000, 1000, true}, // foreach by default on CUDA
		{core.Optimizer{Kind: core.AdamW, Impl: "fused", InBackward: true}, 400, 400, 0, false},
		{core.Optimizer{Kind: core.AdamW, Impl: "foreach", InBackward: true}, 400, 400, 400, true},
		{core.Optimizer{Kind: core.AdamW, Impl: "for-loop", InBackward: true}, 400, 400, 800, false},
		{core.Optimizer{Kind: core.AdamW8bit, InBackward: true}, 400, 400, 0, false},
		{core.Optimizer{Kind: core.Adafactor}, 400, 1000, 800, false},
	} {
		got, perTensor := c.opt.StepTemporary(c.largest, c.total)
		if got != c.want || perTensor != c.perTensor {
			t.Errorf("%s impl %q in_backward=%v: %d B of step temporaries (per tensor %v), want %d (%v)", c.opt.Kind, c.opt.Impl, c.opt.InBackward, got, perTensor, c.want, c.perTensor)
		}
	}
}
