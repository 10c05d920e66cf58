package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// DeepSpeed's offload_param without offload_optimizer (offload(params=
// "cpu") alone at zero=3), hand-counted against the same plan without
// offload and with offload(optimizer="cpu", params="cpu"), on the model
// of TestZeROOffload: two bias-free linears 1024 -> 4096 -> 1024 on 8
// ranks, bf16-mixed AdamW, one micro-batch; this rank's partition is
// part = 1,048,576 elements, one sub-group (sub_group_size 1e9). Read
// from deepspeed/runtime/zero/stage3.py at edaa722: _configure_offloading
// sets offload_param and offload_optimizer from their own devices,
// self.device is the GPU unless offload_optimizer is set, and
// _create_fp32_partitions makes the fp32 partitions there
// (fp16_partitioned_groups_flat[i].to(self.device, ...).clone()); the
// optimizer steps on them; _reassign_or_swap_out_partitioned_parameters
// copy_s the updated fp32 partition into the 16-bit host partition.
//
//   - GPU: only the bf16 partition (2 B per element) leaves it at setup;
//     master, moments and the bf16 gradient partition stay (12 + 2 B), so
//     the end of the backward is 2 B lower than without offload as well.
//   - Host: the bf16 partition, pinned (2 B), and the fp32 temporary
//     torch's blocking copy_ converts in on the CPU (Copy.cu
//     copy_kernel_cuda at pytorch 007aa8ae), one sub-group's: 4 B; no optimizer state or
//     fp32 gradients: 6 B per element.
//   - PCIe per step: each module's partition before each of its two
//     gathers, 2 x 2 B, and the updated partition back in fp32, 4 B:
//     8 B, no gradient copies.
//   - Time: the GPU's optimizer step as without offload, no CPU step.
//
// With optimizer="cpu" as well: TestZeROOffload's zero=3 params="cpu" row,
// 16 B off the GPU, 20 B on the host, 12 B over PCIe.
func TestZeROParamOffloadOnly(t *testing.T) {
	const part = 1_048_576
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, Zero: 3})
	base, err := Evaluate(plan, core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off                               core.Offload
		gpuSaved, host, pcie              int64
		hostParams, hostStates, hostGrads int64
		staging                           int64
		gpuStep                           bool
	}{
		{core.Offload{Params: "cpu"}, 2 * part, 6 * part, 8 * part, 2 * part, 0, 0, 4 * part, true},
		{core.Offload{Params: "cpu", Optimizer: "cpu"}, 16 * part, 20 * part, 12 * part, 2 * part, 12 * part, 4 * part, 0, false},
	} {
		r, err := Evaluate(withPlan(plan, func(q *core.Plan) { q.Offload = &c.off }), core.Options{Timeline: true})
		if err != nil {
			t.Fatalf("%+v: %v", c.off, err)
		}
		if got := allocatedLastIn(base, replay.PhaseSetup) - allocatedLastIn(r, replay.PhaseSetup); got != c.gpuSaved {
			t.Errorf("%+v: %d B off the GPU at setup, want %d", c.off, got, c.gpuSaved)
		}
		if got := allocatedLastIn(base, replay.PhaseBackward) - allocatedLastIn(r, replay.PhaseBackward); got != c.gpuSaved {
			t.Errorf("%+v: %d B off the GPU at the end of the backward, want %d", c.off, got, c.gpuSaved)
		}
		if r.HostMemory != c.host {
			t.Errorf("%+v: host memory %d B, want %d (%v)", c.off, r.HostMemory, c.host, r.HostBreakdown)
		}
		for name, want := range map[string]int64{
			"parameters (pinned)":                c.hostParams,
			"optimizer state and master weights": c.hostStates,
			"fp32 gradients":                     c.hostGrads,
			"fp32 staging of the updated partition (pageable, at the step)": c.staging,
		} {
			if got := hostShare(r, name); got != want {
				t.Errorf("%+v: host row %q %d B, want %d", c.off, name, got, want)
			}
		}
		if got := r.Traffic.PCIe - base.Traffic.PCIe; got != c.pcie {
			t.Errorf("%+v: PCIe %d B per step, want %d", c.off, got, c.pcie)
		}
		if r.States.Master != 4*part || r.States.Optimizer != 8*part {
			t.Errorf("%+v: states master %d optimizer %d, want %d and %d", c.off, r.States.Master, r.States.Optimizer, 4*part, 8*part)
		}
		gpuStep, cpuStep := stepShare(r, "optimizer"), stepShare(r, "cpu_optimizer")
		switch {
		case c.gpuStep && (gpuStep != stepShare(base, "optimizer") || gpuStep == 0 || cpuStep != 0):
			t.Errorf("%+v: optimizer %.6g s on the GPU (without offload %.6g s), cpu_optimizer %.6g s: want the GPU's step only", c.off, gpuStep, stepShare(base, "optimizer"), cpuStep)
		case !c.gpuStep && (gpuStep != 0 || cpuStep == 0):
			t.Errorf("%+v: optimizer %.6g s on the GPU, cpu_optimizer %.6g s: want the host's step only", c.off, gpuStep, cpuStep)
		}
	}
}

// Every micro-batch gathers each module again, so with offload_param its
// partitions cross PCIe once per micro-batch (partition_parameters.py
// copies the host partition to the GPU before each all-gather): at
// grad_accum=4, the model of TestZeROParamOffloadOnly sends 4 x (2 x 2 B)
// per partition element up, and the step's fp32 copy back (4 B) once:
// 20 B, against 8 B at one micro-batch.
func TestZeROParamOffloadGradAccum(t *testing.T) {
	const part = 1_048_576
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, Zero: 3})
	for _, c := range []struct {
		accum, pcie int64
	}{{1, 8 * part}, {4, 20 * part}} {
		q := withPlan(plan, func(q *core.Plan) { q.GradAccum = c.accum })
		base, err := Evaluate(q, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := Evaluate(withPlan(q, func(q *core.Plan) { q.Offload = &core.Offload{Params: "cpu"} }), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Traffic.PCIe - base.Traffic.PCIe; got != c.pcie {
			t.Errorf("grad_accum=%d: PCIe %d B per step, want %d", c.accum, got, c.pcie)
		}
	}
}

// The time of offload_param alone on the model of
// TestZeROParamOffloadOnly (H100-80GB, part = 1,048,576 elements):
//
//   - each gather's copy of the bf16 partition to the GPU (2 x 2 part B
//     per step) runs on DeepSpeed's all-gather stream in the chain of the
//     prefetched gathers, so it overlaps the compute as the gathers do:
//     at 64 x 2048 tokens each module's forward and backward outlast its
//     copy and nothing of it is exposed (at 1 x 8 tokens the chain is
//     exposed);
//   - the updated fp32 partition comes back (4 part B) into torch's
//     pageable staging tensor, at the pageable rate, exposed after the
//     step: offload = 4 part B at timing.PageableD2HSeconds, 10.8/25.8 of
//     the pinned rate (before: all 8 part B at the pinned rate, exposed,
//     1.71e-4 s; now 0.86e-4 x 25.8/10.8 = 2.04e-4 s);
//   - then the CPU casts the fp32 staging into the bf16 partition (torch's
//     blocking copy_ converts on the CPU): 4 B read and 2 B written per
//     element, the node's 8 ranks at once on its host bandwidth
//     (timing.StagedCastSeconds).
func TestZeROParamOffloadTime(t *testing.T) {
	const part = 1_048_576
	m := &core.Model{Name: "two", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}, &nn.Linear{In: 4096, Out: 1024}}, Loss: "mse"}
	plan := distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 8, Zero: 3})
	plan.Batch, plan.Seq = 64, 2048
	plan.Offload = &core.Offload{Params: "cpu"}
	r := evalPlan(t, plan)
	cast := 8 * 6 * float64(part) / plan.Cluster.HostRate(plan.Device) // 8 ranks of the node, 4 B read + 2 B written per element
	if got, want := stepShare(r, "offload"), timing.PageableD2HSeconds(plan.Device, 4*part)+cast; !within(got, want, 1e-9) {
		t.Errorf("offload %.6g s, want %.6g s: the fp32 copy back at the pageable rate and its cast on the CPU, the gathers' copies hidden", got, want)
	}
	small := withPlan(plan, func(q *core.Plan) { q.Batch, q.Seq = 1, 8 })
	if got, min := stepShare(evalPlan(t, small), "offload"), timing.PageableD2HSeconds(plan.Device, 4*part)+cast; got <= min {
		t.Errorf("1 x 8 tokens: offload %.6g s, want more than the copy back's %.6g s (the gathers' copies outlast the compute)", got, min)
	}
}
