package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// Lightning's FSDPStrategy under precision="bf16-mixed" builds its
// MixedPrecision in FSDPPrecision.mixed_precision_config
// (src/lightning/fabric/plugins/precision/fsdp.py and
// src/lightning/pytorch/plugins/precision/fsdp.py of
// Lightning-AI/pytorch-lightning), and the answer depends on the release:
//
//   - 2.1.0 to 2.5.x (2.5.6: 5b3bb74310): param_dtype float32,
//     reduce_dtype and buffer_dtype bfloat16, the forward under
//     torch.autocast(bfloat16) ("16-mixed" the same with float16):
//     parallel(fsdp=1, param_dtype="fp32", reduce_dtype="bf16");
//   - 2.0.x, and 2.6.0 onwards ("Fix FSDP mixed precision semantics",
//     #21361, 05ae8b37c9; 2.6.0 is 8540370985): all three bfloat16, which
//     is memsh's FSDP1 default under bf16-mixed (accelerate's policy,
//     core.Parallelism.FSDPParams and FSDPReduce).
//
// Hand-counted on the pair of TestFSDP1SyncEachBatch (8 ranks, one
// FlatParameter of n = 8,192,000 elements, 4 micro-batches under
// Lightning's no_backward_sync, FSDP1's no_sync()): with the fp32
// param_dtype the all-gather writes the fp32 FlatParameter (4 n B per
// gather, one a micro-batch, as the root's flat parameter is not freed
// after forward (_post_forward_reshard): 16 n B a step; bf16 8 n B), the unsharded
// gradient kept between micro-batches is fp32 (4 n B of gradient state;
// bf16 2 n B), and the synchronising micro-batch casts it to bf16 for the
// one reduce-scatter of the step (2 n B either way).
func TestFSDP1LightningMixedPrecision(t *testing.T) {
	const n = 8_192_000
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	for _, c := range []struct {
		name          string
		param, reduce units.DType
		grads, ag, rs int64
	}{
		{"Lightning 2.1-2.5", units.FP32, units.BF16, 4 * n, 16 * n, 2 * n},
		{"Lightning 2.0 and 2.6+, accelerate (the default)", units.InvalidDType, units.InvalidDType, 2 * n, 8 * n, 2 * n},
	} {
		p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1, FSDPParamDType: c.param, FSDPReduceDType: c.reduce})
		p.GradAccum = 4
		r := evalPlan(t, p)
		ag, rs := commBytes(r, "all_gather"), commBytes(r, "reduce_scatter")
		if r.States.Grads != c.grads || ag != c.ag || rs != c.rs {
			t.Errorf("%s: gradient state %d B, all-gathered %d B, reduce-scattered %d B a step; want %d, %d, %d",
				c.name, r.States.Grads, ag, rs, c.grads, c.ag, c.rs)
		}
	}
}
