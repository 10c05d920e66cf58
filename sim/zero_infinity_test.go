package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// ZeRO-Infinity (replay/offload_nvme.go), hand-counted on the two
// bias-free linears of TestZeROOffload (1024 -> 4096 -> 1024) at zero=3
// on 8 ranks, bf16-mixed AdamW: this rank's partition p = 1,048,576
// elements, one sub-group (sub_group_size 1e9), 4 MiB in fp32, so
// swappable (MIN_AIO_BYTES 1 MiB).
//
//   - optimizer="nvme": master, moments and fp32 gradients (16 p) go to
//     NVMe; the host pins the optimizer swapper's 4 fp32 buffers of the
//     largest sub-group (16 p, p is a multiple of the 256-element
//     alignment) and keeps the bf16 gradient partitions (2 p): 18 p, what
//     optimizer="cpu" holds (12 + 4 + 2). NVMe per step: the gradients
//     out at the boundary (4 p), the step's read of master, moments and
//     gradients (16 p) and its write of master and moments (12 p): 32 p.
//     GPU and PCIe as with optimizer="cpu".
//   - params="nvme" as well: the trainable group's pinned flat buffer
//     holds min(p, max_in_cpu = 1e9) = p elements, so every sub-group
//     stays in host memory (2 p); the parameter swapper pins 5 buffers of
//     1e8 elements aligned to 512 (100,000,256) in bf16: 1,000,002,560 B.
//     No parameter crosses NVMe.
func TestZeROInfinity(t *testing.T) {
	const part = 1_048_576
	const paramSwap = 5 * 100_000_256 * 2
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, Zero: 3})
	cpu, err := Evaluate(withPlan(plan, func(q *core.Plan) { q.Offload = &core.Offload{Optimizer: "cpu"} }), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off        core.Offload
		host, nvme int64
		rows       map[string]int64
	}{
		{core.Offload{Optimizer: "nvme"}, 18 * part, 32 * part,
			map[string]int64{"optimizer swap buffers (pinned)": 16 * part, "bf16 gradient buffers (pinned)": 2 * part, "optimizer state and master weights": 0, "fp32 gradients": 0}},
		{core.Offload{Optimizer: "nvme", Params: "nvme"}, 20*part + paramSwap, 32 * part,
			map[string]int64{"optimizer swap buffers (pinned)": 16 * part, "parameters (pinned)": 2 * part, "parameter swap buffers (pinned)": paramSwap}},
		// offload_param alone: master, moments and gradients stay on the
		// GPU (stage3.py _create_fp32_partitions at edaa722); the host adds
		// the fp32 temporary of copy_ at the step (one sub-group, 4 p).
		{core.Offload{Params: "nvme"}, 6*part + paramSwap, 0,
			map[string]int64{"parameters (pinned)": 2 * part, "parameter swap buffers (pinned)": paramSwap, "optimizer state and master weights": 0,
				"fp32 staging of the updated partition (pageable, at the step)": 4 * part}},
	} {
		r, err := Evaluate(withPlan(plan, func(q *core.Plan) { q.Offload = &c.off }), core.Options{})
		if err != nil {
			t.Fatalf("%+v: %v", c.off, err)
		}
		if r.HostMemory != c.host {
			t.Errorf("%+v: host memory %d B, want %d (%v)", c.off, r.HostMemory, c.host, r.HostBreakdown)
		}
		for name, want := range c.rows {
			if got := hostShare(r, name); got != want {
				t.Errorf("%+v: host row %q %d B, want %d", c.off, name, got, want)
			}
		}
		if r.Traffic.NVMe != c.nvme {
			t.Errorf("%+v: NVMe traffic %d B per step, want %d", c.off, r.Traffic.NVMe, c.nvme)
		}
		if c.off.Params == "" && (r.Traffic.PCIe != cpu.Traffic.PCIe || r.PeakAllocated != cpu.PeakAllocated) {
			t.Errorf("%+v: PCIe %d B, GPU peak %d B, want optimizer=\"cpu\"'s %d and %d", c.off, r.Traffic.PCIe, r.PeakAllocated, cpu.Traffic.PCIe, cpu.PeakAllocated)
		}
	}
}

// Parameters past max_in_cpu go to NVMe, hand-counted on one GPU
// (zero=3, dp=1) with two bias-free 32768 x 32768 linears, bf16-mixed:
// each weight is q = 2^30 elements and a sub-group of its own (each
// reaches sub_group_size 1e9 alone). The trainable group's pinned flat
// buffer is min(2q, 1e9) = 1e9 elements (2e9 B), too small for either
// sub-group, so both live on NVMe: 2 B x 2q = 4 GiB. Every gather reads
// its weight's partition first: forward and backward, 2 x 4 GiB; the step
// writes the updated 4 GiB back. The partitioned swap buffer holds the
// largest NVMe sub-group's parameters, q bf16 elements (2 GiB); the
// optimizer swapper's 4 fp32 buffers of q elements, 16 GiB.
func TestZeROInfinityParamsOnNVMe(t *testing.T) {
	const q = 1 << 30
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 32768, Out: 32768}, &nn.Linear{In: 32768, Out: 32768}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 1, Zero: 3})
	plan.Offload = &core.Offload{Optimizer: "nvme", Params: "nvme"}
	r, err := Evaluate(plan, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]int64{
		"parameters (pinned)":             2_000_000_000,
		"parameter swap buffers (pinned)": 5*100_000_256*2 + 2*q,
		"optimizer swap buffers (pinned)": 16 * q,
	}
	for name, want := range rows {
		if got := hostShare(r, name); got != want {
			t.Errorf("host row %q %d B, want %d (%v)", name, got, want, r.HostBreakdown)
		}
	}
	params := int64(2 * 2 * q)
	want := 2*params + params + 32*2*q // gathers, the step's write, the optimizer's 32 B per element
	if r.Traffic.NVMe != want {
		t.Errorf("NVMe traffic %d B per step, want %d", r.Traffic.NVMe, want)
	}
	// Every micro-batch gathers again: 3 micro-batches read 3 x 2 x 4 GiB;
	// the step's writes and the optimizer's bytes stay once per step.
	plan.GradAccum = 3
	if r, err = Evaluate(plan, core.Options{}); err != nil {
		t.Fatal(err)
	}
	if want := 3*2*params + params + 32*2*q; r.Traffic.NVMe != want {
		t.Errorf("grad_accum=3: NVMe traffic %d B per step, want %d", r.Traffic.NVMe, want)
	}
}

// The step's nvme term is the replay's NVMe bytes at the node's rates,
// shared by the node's ranks (timing/nvme.go): with the default rates
// (10 GB/s reads, 5 GB/s writes, hw.DefaultNVMe) the 8 ranks of
// TestZeROInfinity's node each read 16 p and write 16 p bytes, p =
// 1,048,576; cluster(nvme_read=, nvme_write=) rescales it. The CPU step
// (cpu_optimizer) is the same as with optimizer="cpu".
func TestZeROInfinityTime(t *testing.T) {
	const part = 1_048_576
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, Zero: 3})
	cpu, err := Evaluate(withPlan(plan, func(q *core.Plan) { q.Offload = &core.Offload{Optimizer: "cpu"} }), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cluster     hw.Cluster
		read, write float64 // GB/s
	}{{hw.Cluster{}, 10, 5}, {hw.Cluster{NVMeReadGBps: 48, NVMeWriteGBps: 26}, 48, 26}} {
		r, err := Evaluate(withPlan(plan, func(q *core.Plan) {
			q.Offload = &core.Offload{Optimizer: "nvme"}
			q.Cluster = c.cluster
		}), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := 8 * (16*part/(c.read*1e9) + 16*part/(c.write*1e9))
		if got := stepShare(r, "nvme"); math.Abs(got-want) > 1e-12 {
			t.Errorf("%+v: nvme %.9f s, want %.9f", c.cluster, got, want)
		}
		if got, w := stepShare(r, "cpu_optimizer"), stepShare(cpu, "cpu_optimizer"); got != w {
			t.Errorf("%+v: cpu_optimizer %.9f s, want optimizer=\"cpu\"'s %.9f", c.cluster, got, w)
		}
	}
}

// The host check counts the GPUs of one node (replay's checkHost): the
// cluster's gpus_per_node, unset an 8-GPU node or the layout's GPUs when
// fewer (hw.Cluster.Norm). A ZeRO-Offload plan on 16 GPUs without a
// cluster needs 8 x its per-GPU host memory per node; it counted 1 GPU
// before.
func TestHostCheckGPUsPerNode(t *testing.T) {
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	for _, c := range []struct {
		dp      int64
		cluster hw.Cluster
		gpus    int64
	}{
		{16, hw.Cluster{}, 8},
		{8, hw.Cluster{}, 8},
		{4, hw.Cluster{}, 4},
		{16, hw.Cluster{Nodes: 4, GPUsPerNode: 4}, 4},
	} {
		plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: c.dp, Zero: 3})
		plan.Offload, plan.Cluster = &core.Offload{Optimizer: "cpu"}, c.cluster
		r, err := Evaluate(plan, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		plan.HostMemory = c.gpus*r.HostMemory - 1
		_, err = Evaluate(plan, core.Options{})
		if want := fmt.Sprintf("(%d GPUs x ", c.gpus); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("dp=%d %+v: error %v, want the node's %d GPUs counted %q", c.dp, c.cluster, err, c.gpus, want)
		}
		plan.HostMemory++
		if _, err := Evaluate(plan, core.Options{}); err != nil {
			t.Errorf("dp=%d %+v: %v with host_memory exactly %d GPUs' need", c.dp, c.cluster, err, c.gpus)
		}
	}
}

// The partitioned swap buffer is sized by the largest sub-group of all,
// by its parameters' whole numel, once any sub-group is on NVMe
// (stage3.py 955-969 at DeepSpeed edaa722), hand-counted at zero=3 on
// 2 ranks, bf16-mixed: A = linear(40000, 50000), 2e9 elements, partition
// 1e9, closes sub-group 0 and fills the pinned flat buffer (min(1.2048e9,
// 1e9) = 1e9 elements) exactly; B = linear(50000, 8192), partition
// 204,800,000, sub-group 1, no longer fits and lives on NVMe. The buffer
// holds A's 2e9 whole elements (4e9 B), not B's. NVMe per step: AdamW's
// 32 B per element of both optimizer sub-groups, B's partition read at
// its two gathers and written after the step.
func TestZeROInfinityLargestSubGroupOnHost(t *testing.T) {
	const a, b = 1_000_000_000, 204_800_000 // partitions
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 40000, Out: 50000}, &nn.Linear{In: 50000, Out: 8192}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 2, Zero: 3})
	plan.Offload = &core.Offload{Optimizer: "nvme", Params: "nvme"}
	r, err := Evaluate(plan, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{
		"parameters (pinned)":             2 * a,
		"parameter swap buffers (pinned)": 5*100_000_256*2 + 2*2*a,
		"optimizer swap buffers (pinned)": 16 * a,
	} {
		if got := hostShare(r, name); got != want {
			t.Errorf("host row %q %d B, want %d (%v)", name, got, want, r.HostBreakdown)
		}
	}
	if want := int64(32*(a+b) + 2*2*b + 2*b); r.Traffic.NVMe != want {
		t.Errorf("NVMe traffic %d B per step, want %d", r.Traffic.NVMe, want)
	}
}
