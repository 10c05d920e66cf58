package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// ZeRO-Offload on 8 data-parallel ranks, hand-counted: two bias-free
// linears 1024 -> 4096 -> 1024 (Psi = 8,388,608 parameters, the largest
// L = 4,194,304), bf16-mixed (DeepSpeed: bf16 parameters and gradients,
// fp32 master and AdamW state), one micro-batch. This rank's partition is
// Psi/8 = 1,048,576 elements for every stage (Psi is a multiple of 16, so
// stages 1-2 pad nothing; stage 3 splits each parameter 8 ways).
//
//   - Off the GPU at setup: the fp32 master and both moments, 12 B per
//     partition element; stage 3 also moves its bf16 gradient partitions
//     (2 B), and stages 1-2 add temp_grad_buffer_for_gpu_offload, a bf16
//     buffer of the largest parameter (2 L). At the end of the backward
//     stages 1-2 also lack the bf16 gradient partition the GPU optimizer
//     would read, grads_in_partition, which holds the whole parameter the
//     partition falls in (2 L, replay/zero_grads.go).
//   - Host: master + moments 12 B, fp32 gradients 4 B, and either the bf16
//     staging copy (stages 1-2) or the bf16 gradient partitions (stage 3),
//     2 B: 18 B per partition element. Stages 1-2 also pin
//     temp_grad_buffer_for_cpu_offload, a bf16 buffer of the largest
//     parameter on the host (stage_1_and_2.py 585-590 at edaa722): 2 L.
//     The breakdown's "bf16 gradient buffers (pinned)" row holds that
//     buffer (stages 1-2) or the gradient partitions (stage 3), apart
//     from the "fp32 gradients" the CPU optimizer steps on (4 B).
//   - PCIe per step: the fp32 gradients down and the bf16 partition back,
//     6 B; stage 3 also sends the bf16 partition down and up once, 4 B more.
//   - With the parameters offloaded too (zero=3, ZeRO-Infinity on the
//     CPU) the bf16 partition leaves the GPU (2 B more off it, 2 B more on
//     the host) and no longer comes back after the step (2 B less PCIe),
//     but each of the two modules copies its partition to the GPU before
//     each of its two all-gathers (forward, backward): 4 B more PCIe.
func TestZeROOffload(t *testing.T) {
	const psi, largest, part = 8_388_608, 4_194_304, 1_048_576
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	for _, c := range []struct {
		zero                 int
		params               string
		gpuSaved, host, pcie int64
		partAfterBackward    int64 // the bf16 gradient partition stages 1-2 keep on the GPU for the step
		gradBufs             int64 // the host breakdown's bf16 gradient buffers
	}{
		{1, "", 12*part - 2*largest, 18*part + 2*largest, 6 * part, 2 * largest, 2 * largest},
		{2, "", 12*part - 2*largest, 18*part + 2*largest, 6 * part, 2 * largest, 2 * largest},
		{3, "", 14 * part, 18 * part, 10 * part, 0, 2 * part},
		{3, "cpu", 16 * part, 20 * part, 12 * part, 0, 2 * part},
	} {
		plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, Zero: c.zero})
		if m.Params() != psi {
			t.Fatalf("params %d, want %d", m.Params(), psi)
		}
		base, err := Evaluate(plan, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		off := withPlan(plan, func(q *core.Plan) { q.Offload = &core.Offload{Optimizer: "cpu", Params: c.params} })
		r, err := Evaluate(off, core.Options{Timeline: true})
		if err != nil {
			t.Fatalf("zero=%d: %v", c.zero, err)
		}
		if got := allocatedLastIn(base, replay.PhaseSetup) - allocatedLastIn(r, replay.PhaseSetup); got != c.gpuSaved {
			t.Errorf("zero=%d params=%q: offload takes %d B off the GPU at setup, want %d", c.zero, c.params, got, c.gpuSaved)
		}
		if got := allocatedLastIn(base, replay.PhaseBackward) - allocatedLastIn(r, replay.PhaseBackward); got != c.gpuSaved+c.partAfterBackward {
			t.Errorf("zero=%d params=%q: offload takes %d B off the GPU at the end of the backward, want %d", c.zero, c.params, got, c.gpuSaved+c.partAfterBackward)
		}
		if r.HostMemory != c.host {
			t.Errorf("zero=%d params=%q: host memory %d B, want %d", c.zero, c.params, r.HostMemory, c.host)
		}
		if g, b := hostShare(r, "fp32 gradients"), hostShare(r, "bf16 gradient buffers (pinned)"); g != 4*part || b != c.gradBufs {
			t.Errorf("zero=%d params=%q: host fp32 gradients %d B, bf16 gradient buffers %d B, want %d and %d (%v)", c.zero, c.params, g, b, 4*part, c.gradBufs, r.HostBreakdown)
		}
		if got := r.Traffic.PCIe - base.Traffic.PCIe; got != c.pcie {
			t.Errorf("zero=%d params=%q: PCIe %d B per step, want %d", c.zero, c.params, got, c.pcie)
		}
		if r.States.Master != 4*part || r.States.Optimizer != 8*part {
			t.Errorf("zero=%d: states master %d optimizer %d, want %d and %d (the ZeRO paper's model states, wherever they live)",
				c.zero, r.States.Master, r.States.Optimizer, 4*part, 8*part)
		}
	}
}

// The combinations still refused say what is simulated instead.
func TestZeROOffloadRefusals(t *testing.T) {
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 64, Out: 64}}, Loss: "mse"}
	for _, c := range []struct {
		par  core.Parallelism
		off  core.Offload
		want string
	}{
		{core.Parallelism{DP: 8, Zero: 2}, core.Offload{Optimizer: "cpu", Params: "cpu"}, "offload(params=...) needs zero=3 (got zero=2)"},
		{core.Parallelism{DP: 8, Zero: 2}, core.Offload{Optimizer: "nvme", Params: "nvme"}, "offload(params=...) needs zero=3 (got zero=2)"},
		{core.Parallelism{DP: 8, FSDP: true}, core.Offload{Optimizer: "nvme", Params: "nvme"}, "FSDP offloads to CPU memory only"},
		{core.Parallelism{DP: 8, Zero: 2}, core.Offload{Optimizer: "nvme"}, `offload(optimizer="nvme") needs zero=3 (got zero=2)`},
		// DeepSpeed offloads through its ZeRO optimizer only (core/offload.go).
		{core.Parallelism{DP: 1}, core.Offload{Optimizer: "cpu"}, "runs through its ZeRO optimizer only"},
		{core.Parallelism{DP: 1}, core.Offload{Optimizer: "nvme"}, "whose NVMe offload runs with ZeRO stage 3 only"},
		{core.Parallelism{DP: 1}, core.Offload{Optimizer: "cpu", Params: "cpu"}, `offload(params="cpu") is DeepSpeed's offload_param, which runs with ZeRO stage 3 only`},
		{core.Parallelism{DP: 8}, core.Offload{Optimizer: "nvme", Params: "nvme"}, `offload(params="nvme") is DeepSpeed's offload_param`},
		{core.Parallelism{DP: 8, FSDP: true}, core.Offload{Optimizer: "cpu"}, "FSDP offloads parameters, gradients and optimizer state together"},
		{core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}, core.Offload{Optimizer: "cpu"}, "FSDP offloads parameters, gradients and optimizer state together"},
		{core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}, core.Offload{Params: "nvme", Optimizer: "nvme"}, "FSDP offloads to CPU memory only"},
		{core.Parallelism{DP: 8, DistributedOptimizer: true}, core.Offload{Optimizer: "cpu"}, "not simulated together with distributed_optimizer= yet"},
	} {
		p := distPlan(t, m, "bf16-mixed", c.par)
		p.Offload = &c.off
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %+v: error %v, want %q", c.par, c.off, err, c.want)
		}
	}
}

// Offloading parameters or optimizer state reaches the replay only under
// a sharding that keeps them on the host itself: ZeRO (shard_offload.go)
// or FSDP (fsdp_offload.go, fsdp1_offload.go). Every layout without zero= or fsdp= (one
// GPU, DDP, tensor parallelism, Megatron with and without its
// distributed optimizer), with every tier of params= and optimizer=, in
// training and evaluation, is refused by the offload check; a sharded
// layout that validates is one of the two. The replay's one-GPU
// parameter streaming and non-ZeRO optimizer offload were removed on
// this (replay/offload.go).
func TestOffloadNeedsSharding(t *testing.T) {
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 64, Out: 64}, &nn.Linear{In: 64, Out: 64}}, Loss: "mse"}
	var offloads []core.Offload
	for _, params := range []string{"", "cpu", "nvme"} {
		for _, opt := range []string{"", "cpu", "nvme"} {
			if params != "" || opt != "" {
				offloads = append(offloads, core.Offload{Params: params, Optimizer: opt})
			}
		}
	}
	unsharded := []struct {
		prec string
		par  core.Parallelism
	}{
		{"bf16-mixed", core.Parallelism{}},
		{"bf16-mixed", core.Parallelism{DP: 1}},
		{"bf16-mixed", core.Parallelism{DP: 8}},
		{"bf16-mixed", core.Parallelism{TP: 2}},
		{"megatron", core.Parallelism{DP: 8}},
		{"megatron", core.Parallelism{DP: 8, DistributedOptimizer: true}},
	}
	sharded := []core.Parallelism{{DP: 1, Zero: 2}, {DP: 8, Zero: 1}, {DP: 8, Zero: 3}, {DP: 8, FSDP: true}, {DP: 8, FSDP: true, FSDPVersion: 1}}
	valid := 0
	for _, phase := range []core.Phase{core.Train, core.Eval} {
		for _, o := range offloads {
			for _, u := range unsharded {
				p := distPlan(t, m, u.prec, u.par)
				p.Phase, p.Offload = phase, &o
				if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "offload") {
					t.Errorf("%s %s, phase %d, offload %+v: %v, want the offload refusal", u.prec, u.par, phase, o, err)
				}
			}
			for _, par := range sharded {
				p := distPlan(t, m, "bf16-mixed", par)
				p.Phase, p.Offload = phase, &o
				if p.Validate() != nil {
					continue
				}
				valid++
				if mode := replay.ModeOf(p); !(mode == replay.DistZeRO || mode == replay.DistFSDP) {
					t.Errorf("%s, offload %+v: validates in sharding mode %v, which keeps nothing on the host", par, o, mode)
				}
			}
		}
	}
	if valid == 0 {
		t.Errorf("no sharded offload layout validates")
	}
}

// FSDP2 with CPUOffloadPolicy on 8 ranks, hand-counted with the same two
// linears (bf16-mixed: fp32 parameters and gradients, bf16 all-gathers):
// each weight's shard is 1/8 of its rows, s = 2 x 524,288 = 1,048,576
// elements. Both linears sit in the root unit (no repeated blocks), which
// is gathered once and kept through the backward.
//
//   - Off the GPU at setup: the fp32 shards and AdamW's two fp32 moments,
//     12 B per shard element.
//   - Host: shards 4 B, moments 8 B, fp32 gradient shards 4 B: 16 B.
//   - PCIe: the fp32 shards down for the one gather and the fp32
//     gradient shard up after the reduce-scatter: 8 B.
//   - The gather reads a GPU copy of the shards (4 B) and its bf16 cast
//     (2 B) next to the all-gather output: the gather's transient peak
//     grows by 6 B per shard element.
//   - torch's AdamW steps the shards on the host, its for-loop
//     (timing/torch_cpu_optimizer.go): 80 B per shard element in fp32,
//     the 8 ranks of the node sharing its default 614.4 GB/s (the H100's
//     reference system, a DGX H100):
//     cpu_optimizer = 8 x 80 x s / 614.4e9; no GPU optimizer step.
func TestFSDPOffload(t *testing.T) {
	const s = 1_048_576
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, FSDP: true})
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
	if r.HostMemory != 16*s {
		t.Errorf("host memory %d B, want %d", r.HostMemory, 16*s)
	}
	if got := r.Traffic.PCIe - base.Traffic.PCIe; got != 8*s {
		t.Errorf("PCIe %d B per step, want %d", got, 8*s)
	}
	terms := func(r *replay.Report) map[string]float64 {
		out := map[string]float64{}
		for _, sh := range r.Time.Breakdown {
			out[sh.Name] = sh.Seconds
		}
		return out
	}
	if got, want := terms(r)["cpu_optimizer"], 8*80.0*s/614.4e9; !within(got, want, 1e-9) {
		t.Errorf("cpu_optimizer %.6g s, want %.6g s (torch's for-loop AdamW, 80 B per shard element)", got, want)
	}
	if got := terms(base)["cpu_optimizer"]; got != 0 {
		t.Errorf("cpu_optimizer %.6g s without offload, want 0", got)
	}
	if got := terms(r)["optimizer"]; got != 0 {
		t.Errorf("optimizer %.6g s on the GPU with the step on the host, want 0", got)
	}
	// The first forward event past the setup is the gather's first
	// allocation: the fp32 copy of the shards.
	for i, pt := range r.Timeline {
		if pt.Phase == replay.PhaseForward {
			if got := pt.Allocated - r.Timeline[i-1].Allocated; got != 4*s {
				t.Errorf("the first forward allocation is %d B, want the %d B fp32 copy of the shards", got, 4*s)
			}
			break
		}
	}
}

// hostShare is the bytes of the host breakdown's row name, 0 without one.
func hostShare(r *replay.Report, name string) int64 {
	for _, s := range r.HostBreakdown {
		if s.Name == name {
			return s.Bytes
		}
	}
	return 0
}

// ZeRO-Offload at stages 1-2 with 4 micro-steps (the model and partition
// of TestZeROOffload, part = 1,048,576 elements per rank). DeepSpeed
// accumulates the 16-bit gradients in a pinned host buffer
// (accumulated_grads_in_cpu, 2 B per partition element) through
// async_accumulate_grad_in_cpu_via_gpu (stage_1_and_2.py at edaa722):
// stage 2 reduces every micro-step and copies down at the first, up and
// down at the three others: 7 copies of 2 B; stage 1 reduces at the
// boundary only, micro_step_id 3: one up, one down, 2 copies. The fp32
// partition down and the bf16 partition up stay 6 B. They are exposed:
// the offload share grows by their PCIe seconds. The host buffer is one
// of the bf16 gradient buffers of the host breakdown, with
// temp_grad_buffer_for_cpu_offload (the largest parameter, 4 part
// elements: 8 part B) at any micro-step count.
func TestZeROOffloadGradAccum(t *testing.T) {
	const part = 1_048_576
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	for _, c := range []struct {
		zero         int
		copies       int64
		host, onHost int64
	}{
		{1, 2, 28 * part, 2 * part},
		{2, 7, 28 * part, 2 * part},
	} {
		one := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, Zero: c.zero})
		one.Offload = &core.Offload{Optimizer: "cpu"}
		four := withPlan(one, func(q *core.Plan) { q.GradAccum = 4 })
		r1, err := Evaluate(one, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r4, err := Evaluate(four, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := r4.Traffic.PCIe-r1.Traffic.PCIe, c.copies*2*part; got != want {
			t.Errorf("zero=%d: accumulation copies %d B per step, want %d (PCIe %d at 4 micro-steps, %d at one)", c.zero, got, want, r4.Traffic.PCIe, r1.Traffic.PCIe)
		}
		if r4.HostMemory != c.host || r4.HostMemory-r1.HostMemory != c.onHost {
			t.Errorf("zero=%d: host memory %d B (one micro-step %d), want %d", c.zero, r4.HostMemory, r1.HostMemory, c.host)
		}
		if b1, b4 := hostShare(r1, "bf16 gradient buffers (pinned)"), hostShare(r4, "bf16 gradient buffers (pinned)"); b1 != 8*part || b4 != 8*part+c.onHost {
			t.Errorf("zero=%d: bf16 gradient buffers on the host %d B at one micro-step, %d at 4, want %d and %d", c.zero, b1, b4, 8*part, 8*part+c.onHost)
		}
		want := stepShare(r1, "offload") + timing.PCIeSeconds(four.Device, c.copies*2*part)
		if got := stepShare(r4, "offload"); !within(got, want, 1e-9) {
			t.Errorf("zero=%d: offload %.6f s at 4 micro-steps, want %.6f", c.zero, got, want)
		}
	}
}

// allocatedLastIn is what the GPU holds at the last timeline point of
// phase; r needs a timeline.
func allocatedLastIn(r *replay.Report, phase replay.Phase) int64 {
	var last int64
	for _, pt := range r.Timeline {
		if pt.Phase == phase {
			last = pt.Allocated
		}
	}
	return last
}

// allocatedAfterSetup is what the GPU holds when the step's setup ends.
func allocatedAfterSetup(r *replay.Report) int64 { return allocatedLastIn(r, replay.PhaseSetup) }
