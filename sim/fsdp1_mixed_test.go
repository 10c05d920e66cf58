package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// FSDP1 under parameter mixed precision, without offload, hand-counted:
// the two bias-free linears 1000 -> 4096 -> 1000 of TestFSDP1Offload on
// 8 ranks, one FlatParameter, this rank's shard s = 1,024,000 elements.
// The reduce-scatter writes a bf16 shard (2 s B) on the post-backward
// stream; _accumulate_sharded_grad casts it to the parameters' fp32
// (_cast_grad_to_param_dtype, pytorch/pytorch fe03cf693c
// torch/distributed/fsdp/_runtime_utils.py) and frees it, and the fp32
// cast (4 s B) is _saved_grad_shard, then the FlatParameter's .grad the
// optimizer reads. Pure bf16 (parameters in bf16) casts nothing: its
// gradient shard is the reduce-scatter's 2 s B output. (Before the cast was
// replayed the bf16-mixed gradient state was 2 s B.) TestFSDPStreams
// counts the post-backward stream's pool that holds the casts.
func TestFSDP1MixedPrecisionGradCast(t *testing.T) {
	const s = 1_024_000
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	for _, c := range []struct {
		precision string
		grads     int64 // gradient state
	}{
		{"bf16-mixed", 4 * s},
		{"bf16", 2 * s},
	} {
		r, err := Evaluate(distPlan(t, m, c.precision, core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.States.Grads != c.grads {
			t.Errorf("%s: gradient state %d B, want %d", c.precision, r.States.Grads, c.grads)
		}
	}
}
