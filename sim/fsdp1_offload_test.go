package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// FSDP1 with CPUOffload(offload_params=True) on 8 ranks, hand-counted
// (replay/fsdp1_offload.go): two bias-free linears 1000 -> 4096 -> 1000,
// 8,192,000 parameters in one FlatParameter (the root unit: no repeated
// blocks), bf16-mixed (fp32 parameters, bf16 param_dtype). This rank's
// flat shard is s = 8,192,000 / 8 = 1,024,000 elements.
//
//   - Off the GPU at setup: the fp32 flat shard and AdamW's two fp32
//     moments, 12 B per shard element.
//   - Host: the pinned _local_shard and the pinned _cpu_grad, 4 s B each,
//     rounded up by the CachingHostAllocator to 4,194,304 B; the moments
//     (torch.optim's, not pinned) 8 s B.
//   - PCIe: the fp32 shard down for the one gather (the root is kept
//     through the backward), the fp32 gradient shard up: 8 s B.
//   - The gather's first allocation is _mp_shard, the bf16 shard (2 s B);
//     the fp32 copy it is cast from follows and is freed.
//   - The reduce-scatter's bf16 output is cast to an fp32 gradient shard
//     (4 s B) that stays on the GPU as _saved_grad_shard until the
//     backward ends: the last backward allocation of the step is freed
//     at its end, and no gradient is left for the step.
//   - torch's AdamW steps the shard on the host, its for-loop, 80 B per
//     element, 8 ranks sharing 614.4 GB/s (timing/torch_cpu_optimizer.go):
//     the same term as FSDP2's.
func TestFSDP1Offload(t *testing.T) {
	const s = 1_024_000
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1})
	base, err := Evaluate(plan, core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Evaluate(withPlan(plan, func(q *core.Plan) { q.Offload = &core.Offload{Params: "cpu"} }), core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := allocatedAfterSetup(base) - allocatedAfterSetup(r); got != 12*s {
		t.Errorf("offload takes %d B off the GPU at setup, want %d", got, 12*s)
	}
	if want := int64(2*4_194_304 + 8*s); r.HostMemory != want {
		t.Errorf("host memory %d B, want %d (two pinned 4 s blocks rounded to 4 MiB, 8 s of moments)", r.HostMemory, want)
	}
	if got := hostShare(r, "parameters (pinned)"); got != 4_194_304 {
		t.Errorf("pinned flat shard %d B on the host, want 4,194,304", got)
	}
	if got := hostShare(r, "fp32 gradients (pinned)"); got != 4_194_304 {
		t.Errorf("pinned _cpu_grad %d B on the host, want 4,194,304", got)
	}
	// Every block the step allocates is freed by its end: the gradient
	// shard kept through the backward goes in its final callback.
	if end := r.Timeline[len(r.Timeline)-1].Allocated; end != allocatedAfterSetup(r) {
		t.Errorf("%d B allocated when the step ends, want the %d B of the setup", end, allocatedAfterSetup(r))
	}
	if got := r.Traffic.PCIe - base.Traffic.PCIe; got != 8*s {
		t.Errorf("PCIe %d B per step, want %d", got, 8*s)
	}
	if got, want := stepShare(r, "cpu_optimizer"), 8*80.0*s/614.4e9; !within(got, want, 1e-9) {
		t.Errorf("cpu_optimizer %.6g s, want %.6g s (torch's for-loop AdamW, 80 B per shard element)", got, want)
	}
	if got := stepShare(r, "optimizer"); got != 0 {
		t.Errorf("optimizer %.6g s on the GPU with the step on the host, want 0", got)
	}
	var first, saved int64
	for i := 1; i < len(r.Timeline); i++ {
		pt := r.Timeline[i]
		grow := pt.Allocated - r.Timeline[i-1].Allocated
		if pt.Phase == replay.PhaseForward && first == 0 {
			first = grow
		}
		if pt.Phase == replay.PhaseBackward && grow == 4*s {
			saved++
		}
	}
	if first != 2*s {
		t.Errorf("the first forward allocation is %d B, want the %d B bf16 _mp_shard", first, 2*s)
	}
	if saved == 0 {
		t.Errorf("no %d B fp32 gradient shard (_saved_grad_shard) allocated in the backward", 4*s)
	}
}

// bitsandbytes' 4-bit weights offload with FSDP1's CPUOffload only: its
// flat shards hold the codes in their float storage like any flat shard.
// Offload under ZeRO, FSDP2, or with activations on the host beside
// FSDP1 sharded quantized weights, is refused.
func TestQuantOffloadSharding(t *testing.T) {
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 1024}, &nn.Linear{In: 1024, Out: 1024}}, Loss: "mse"}
	for _, c := range []struct {
		par  core.Parallelism
		off  core.Offload
		want string // "" when valid
	}{
		{core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1}, core.Offload{Params: "cpu"}, ""},
		{core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1}, core.Offload{Params: "cpu", Activations: "cpu"}, "with offload under zero= or fsdp= is not simulated"},
		{core.Parallelism{DP: 2, FSDP: true, FSDPVersion: 1}, core.Offload{Activations: "cpu"}, "with offload under zero= or fsdp= is not simulated"},
		{core.Parallelism{DP: 2, Zero: 3}, core.Offload{Params: "cpu", Optimizer: "cpu"}, "with offload under zero= or fsdp= is not simulated"},
	} {
		p := distPlan(t, m, "bf16", c.par)
		p.Quant, p.QuantStorage, p.Offload = "nf4", p.Precision.Params, &c.off
		p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"all-linear"}}
		err := p.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s with %+v: %v, want it valid", c.par, c.off, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s with %+v: error %v, want %q", c.par, c.off, err, c.want)
		}
	}
}

// With gradient accumulation every micro-batch gathers again, so every
// micro-batch copies the shards to the GPU (the model and shard s of
// TestFSDP1Offload, fp32: 4 s B per gather of the root unit). FSDP2
// reduce-scatters every micro-batch and copies each gradient shard up
// (4 s B); FSDP1 under no_sync reduces at the synchronising micro-batch
// only, one copy up per step. 4 micro-batches: FSDP2 4 x 8 s, FSDP1
// 4 x 4 s + 4 s.
func TestFSDPOffloadGradAccumPCIe(t *testing.T) {
	const s = 1_024_000
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	for _, c := range []struct {
		version int
		want    int64
	}{
		{2, 4 * 8 * s},
		{1, 4*4*s + 4*s},
	} {
		p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: c.version})
		p.GradAccum, p.Offload = 4, &core.Offload{Params: "cpu"}
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Traffic.PCIe != c.want {
			t.Errorf("FSDP%d, 4 micro-batches: PCIe %d B per step, want %d", c.version, r.Traffic.PCIe, c.want)
		}
	}
}

// FSDP2's CPUOffloadPolicy pins each parameter's padded shard, and each
// gradient shard comes to the host in a pinned block of its own
// (replay/fsdp_offload.go): the 1000 -> 4096 -> 1000 pair on 8 ranks
// shards each weight into 512,000 fp32 elements (512 of 4,096 rows of
// 1,000; 125 of 1,000 rows of 4,096), 2,048,000 B, each a 2 MiB block:
// 2 x 2 MiB of parameters, 2 x 2 MiB of gradients, and AdamW's moments,
// not pinned, 8 B x 1,024,000.
func TestFSDPOffloadPinnedShards(t *testing.T) {
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true})
	p.Offload = &core.Offload{Params: "cpu"}
	r, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		row  string
		want int64
	}{
		{"parameters (pinned)", 2 * 2_097_152},
		{"fp32 gradients (pinned)", 2 * 2_097_152},
		{"optimizer state and master weights", 8 * 1_024_000},
	} {
		if got := hostShare(r, c.row); got != c.want {
			t.Errorf("host %q %d B, want %d", c.row, got, c.want)
		}
	}
	if want := int64(2 * 2_048_000); r.States.Grads != want {
		t.Errorf("gradient state %d B, want the unrounded %d", r.States.Grads, want)
	}
}

// In evaluation FSDP1's lazy init still pins each flat shard and its
// _cpu_grad (init_flat_param_attributes runs at the first forward), so
// the host holds both, but no gradient is a model state and nothing goes
// back up: the 1000 -> 4096 -> 1000 pair on 8 ranks (TestFSDP1Offload)
// pins 2 x 4 MiB and copies the 4 s B fp32 shard down once.
func TestFSDP1OffloadEval(t *testing.T) {
	const s = 1_024_000
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 4096}, &nn.Linear{In: 4096, Out: 1000}}, Loss: "mse"}
	p := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1})
	p.Phase, p.Offload = core.Eval, &core.Offload{Params: "cpu"}
	r, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.HostMemory != 2*4_194_304 || r.States.Grads != 0 || r.Traffic.PCIe != 4*s {
		t.Errorf("eval: host %d B, gradient state %d B, PCIe %d B; want %d, 0, %d", r.HostMemory, r.States.Grads, r.Traffic.PCIe, 2*4_194_304, 4*s)
	}
}
