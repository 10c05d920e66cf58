package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
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

// FSDP1 with gradient accumulation, with and without no_sync(), hand
// counted on the pair of TestFSDP1MixedPrecisionGradCast (8 ranks, one
// FlatParameter of n = 8,192,000 elements, shard s = n / 8), bf16-mixed,
// 4 micro-batches:
//
//   - no_sync() (the default: Lightning, accelerate): the replayed
//     micro-batch holds the unsharded bf16 flat gradient, 2 n B of
//     gradient state, and reduce-scatters once per step: one message to
//     the reduce-scatter's message (in the reduce dtype);
//   - fsdp_sync_each_batch=True (accelerate's sync_each_batch, fsdp_qlora
//     without --no_sync): _saved_grad_shard, the fp32 shard accumulated
//     over the micro-batches, 4 s B, and a reduce-scatter every
//     micro-batch: 4 times the bytes.
func TestFSDP1SyncEachBatch(t *testing.T) {
	const n = 8_192_000
	const s = n / 8
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	reduced := func(each bool) (grads, rs int64) {
		p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1, SyncEachBatch: each})
		p.GradAccum = 4
		r := evalPlan(t, p)
		return r.States.Grads, commBytes(r, "reduce_scatter")
	}
	syncGrads, syncRS := reduced(false)
	eachGrads, eachRS := reduced(true)
	if syncGrads != 2*n || eachGrads != 4*s {
		t.Errorf("gradient state %d B under no_sync(), %d B with sync_each_batch; want %d and %d", syncGrads, eachGrads, 2*n, 4*s)
	}
	if syncRS <= 0 || eachRS != 4*syncRS {
		t.Errorf("reduce-scattered per step: %d B with sync_each_batch, %d B under no_sync(); want 4 times", eachRS, syncRS)
	}
	// FSDP1 cannot accumulate outside no_sync() with CPU offload.
	p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1, SyncEachBatch: true})
	p.GradAccum, p.Offload = 4, &core.Offload{Params: "cpu"}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "inside no_sync() only") {
		t.Errorf("sync_each_batch with CPU offload: %v, want the no_sync error", err)
	}
}

// FSDP1's reduce dtype, hand-counted on the same pair (n = 8,192,000
// elements, s = n / 8), bf16-mixed:
//
//   - without reduce_dtype, MixedPrecision reduces in param_dtype (bf16):
//     the reduce-scatter's message is the 2 n B bf16 unsharded gradient;
//     the post-backward stream holds it (recorded there, 16 MiB rounded
//     to a 2 MiB multiple) with the 2 s B output and its 4 s B fp32 cast;
//   - reduce_dtype="fp32": _post_backward_hook first casts the unsharded
//     gradient to fp32 on the post-backward stream (4 n B, 32,768,000 B:
//     that stream's pool holds at least it), the reduce-scatter's message
//     is 4 n B and its fp32 output needs no cast.
//
// The gradient state is the fp32 shard, 4 s B, either way.
func TestFSDP1ReduceDType(t *testing.T) {
	const n = 8_192_000
	const s = n / 8
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	for _, c := range []struct {
		reduce  units.DType
		rs      int64
		poolMin int64
	}{
		{units.InvalidDType, 2 * n, 2 * n},
		{units.FP32, 4 * n, 4 * n},
	} {
		r := evalPlan(t, distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1, FSDPReduceDType: c.reduce}))
		if rs := commBytes(r, "reduce_scatter"); rs != c.rs {
			t.Errorf("reduce_dtype %v: %d B reduce-scattered, want %d", c.reduce, rs, c.rs)
		}
		if r.States.Grads != 4*s {
			t.Errorf("reduce_dtype %v: gradient state %d B, want %d", c.reduce, r.States.Grads, 4*s)
		}
		if got := streamPeak(r, "reduce_scatter"); got < c.poolMin {
			t.Errorf("reduce_dtype %v: post-backward stream %d B, want at least %d", c.reduce, got, c.poolMin)
		}
	}
}

// commBytes is the bytes a step's collectives of that name move a rank.
func commBytes(r *replay.Report, name string) int64 {
	var b int64
	for _, cb := range r.CommBytes {
		if cb.Name == name {
			b += cb.Bytes
		}
	}
	return b
}
