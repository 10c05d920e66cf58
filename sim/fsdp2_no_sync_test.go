package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// FSDP2 under gradient accumulation, with and without
// set_requires_gradient_sync(False), hand-counted on the pair of
// TestFSDP1SyncEachBatch (8 ranks, n = 8,192,000 elements, this rank's
// shards s = n / 8), 4 micro-batches:
//
//   - every micro-batch reduce-scatters (torchtitan's trainer, which never
//     turns the sync off: torchtitan/trainer.py at b5bcd76c66): the
//     sharded gradient accumulates, in the gradient dtype (fp32 under
//     bf16-mixed: 4 s B), and each micro-batch reduce-scatters the
//     unsharded gradient in reduce_dtype (fp32, FSDP2's default here):
//     4 n B each, 16 n B a step;
//   - fsdp_no_sync=True (accelerate 1.11.0 and later: accumulate() calls
//     set_requires_gradient_sync(False) on the micro-batches that do not
//     step, accelerator.py no_sync at v1.14.0 beb0672aa8): FSDP2 keeps
//     each parameter's unsharded gradient between micro-batches, upcast
//     to reduce_dtype when that differs from param_dtype (FSDPParam
//     to_accumulated_grad_if_needed; accumulate_unsharded_grad_if_needed
//     adds each micro-batch's bf16 gradient into it): 4 n B of gradient
//     state under bf16-mixed, 2 n B in pure bf16 (the bf16 .grad is the
//     accumulator), and one reduce-scatter a step (4 n B; 2 n B).
//
// The all-gathers are the same either way: the two linears are FSDP2's
// root unit, which is not resharded after forward (_lazy_init sets the
// root's post_forward_mesh_info to None), so one gather a micro-batch of
// the bf16 parameters, 2 n B x 4 = 8 n B a step.
func TestFSDP2NoSync(t *testing.T) {
	const n = 8_192_000
	const s = n / 8
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	for _, c := range []struct {
		precision     string
		noSync        bool
		grads, rs, ag int64
	}{
		{"bf16-mixed", false, 4 * s, 16 * n, 8 * n},
		{"bf16-mixed", true, 4 * n, 4 * n, 8 * n},
		{"bf16", false, 2 * s, 8 * n, 8 * n},
		{"bf16", true, 2 * n, 2 * n, 8 * n},
	} {
		p := distPlan(t, m, c.precision, core.Parallelism{DP: 8, FSDP: true, FSDPNoSync: c.noSync})
		p.GradAccum = 4
		r := evalPlan(t, p)
		ag, rs := commBytes(r, "all_gather"), commBytes(r, "reduce_scatter")
		if r.States.Grads != c.grads || rs != c.rs || ag != c.ag {
			t.Errorf("%s, no_sync %v: gradient state %d B, reduce-scattered %d B, all-gathered %d B a step; want %d, %d, %d",
				c.precision, c.noSync, r.States.Grads, rs, ag, c.grads, c.rs, c.ag)
		}
	}
	// Without accumulation every micro-batch steps: nothing to keep.
	one := evalPlan(t, distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true, FSDPNoSync: true}))
	if one.States.Grads != 4*s {
		t.Errorf("grad_accum=1: gradient state %d B, want the sharded %d", one.States.Grads, 4*s)
	}
	// fsdp_no_sync is FSDP2's; FSDP1 has no_sync() by default.
	for _, par := range []core.Parallelism{{DP: 8, FSDPNoSync: true}, {DP: 8, FSDP: true, FSDPVersion: 1, FSDPNoSync: true}} {
		if err := distPlan(t, m, "bf16-mixed", par).Validate(); err == nil || !strings.Contains(err.Error(), "fsdp_no_sync") {
			t.Errorf("%+v: %v, want an fsdp_no_sync error", par, err)
		}
	}
}
