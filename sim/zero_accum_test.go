package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// accumPrecision is DeepSpeed's bf16 mode with data_types.grad_accum_dtype
// fp32: bf16 parameters, fp32 gradient accumulation, master and moments.
var accumPrecision = core.Precision{Name: "custom", Params: units.BF16, Compute: units.BF16, Grads: units.FP32, Master: units.FP32, States: units.FP32}

// TestZeroGradAccum: grad_accum_dtype fp32 beside a bf16 model
// (DeepSpeed at edaa722) against its bf16 mode ("bf16-mixed"), on the
// 7.5B stack of TestZeRO2GradientPartitions (30 blocks of two
// 125,000,000-element linears, 60 gradients), 8 ranks, hand-counted:
//
//   - ZeRO-3: grad_partitions_flat_buffer is in the accumulation dtype
//     (stage3.py l.741-743): 60 x ceil(125,000,000 / 8) = 937,500,000
//     elements, 3,750,000,000 B in fp32 where bf16 is 1,875,000,000. The
//     reduce bucket (reduce_bucket_size 500,000,000) takes four gradients;
//     the fifth's hook reduces them, in bf16 (communication_data_type),
//     and casts the rank's four partitions to fp32 (__avg_scatter_grads
//     l.1825-1826): 4 x 15,625,000 x 4 = 250,000,000 B, 15 times. The
//     step's flat gradient of its one sub-group (937,500,000 elements,
//     under sub_group_size 1e9) is fp32 already: 3,750,000,000 B with no
//     cast, where bf16 mode flattens 1,875,000,000 B and casts to
//     3,750,000,000.
//   - ZeRO-2: grads_in_partition stays bf16 (stage_1_and_2.py
//     l.1678-1680): 8 parameters whole, 2,000,000,000 B either way; every
//     parameter is reached and the partition is unpadded
//     (7,500,000,000 / 16 is whole), so the step's flat copy is bf16 and
//     cast to fp32, as in bf16 mode: 937,500,000 elements, 1,875,000,000 B
//     and 3,750,000,000 B.
//   - ZeRO-2 with offload_optimizer reads no grad_accum_dtype: the plan
//     is bf16 mode's, gradients and host state alike.
//
// The reduce-scatter carries bf16 in every case: 2 bytes an element of
// the 7,500,000,000.
func TestZeroGradAccum(t *testing.T) {
	mixed, _ := core.LookupPrecision("bf16-mixed")
	for _, c := range []struct {
		name    string
		zero    int
		offload bool
		prec    core.Precision
		grads   int64    // States.Grads
		casts   string   // allocations of "reduced partitions in fp32"
		flat    []string // the step's flat gradient and its cast: tensor:bytes
	}{
		{"zero 3, fp32 accumulation", 3, false, accumPrecision, 3_750_000_000, strings.Repeat("backward:250000000 ", 15),
			[]string{"flat gradient of sub-group:3750000000"}},
		{"zero 3, bf16 mode", 3, false, mixed, 1_875_000_000, "",
			[]string{"flat gradient of sub-group:1875000000", "fp32 gradient of sub-group:3750000000"}},
		{"zero 2, fp32 accumulation", 2, false, accumPrecision, 2_000_000_000, "",
			[]string{"dense flat gradient partition:1875000000", "dense fp32 gradient partition:3750000000"}},
		{"zero 2, bf16 mode", 2, false, mixed, 2_000_000_000, "",
			[]string{"dense flat gradient partition:1875000000", "dense fp32 gradient partition:3750000000"}},
	} {
		p := distPlan(t, linearStack(30, 5000, 25000), "bf16-mixed", core.Parallelism{DP: 8, Zero: c.zero})
		p.Precision = c.prec
		rep, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if rep.States.Grads != c.grads {
			t.Errorf("%s: gradient states %d B, want %d", c.name, rep.States.Grads, c.grads)
		}
		casts, _, _ := zeroTensorEvents(rep, "reduced partitions in fp32")
		if got := strings.Join(casts, " "); strings.TrimSpace(c.casts) != got {
			t.Errorf("%s: reduced partitions cast %q, want %q", c.name, got, strings.TrimSpace(c.casts))
		}
		var flat []string
		for _, e := range rep.Trace.Events {
			if e.Action == "alloc" && (strings.HasSuffix(e.Tensor, "gradient partition") || strings.HasSuffix(e.Tensor, "gradient of sub-group")) {
				flat = append(flat, fmt.Sprintf("%s:%d", e.Tensor, e.Size))
			}
		}
		if fmt.Sprint(flat) != fmt.Sprint(c.flat) {
			t.Errorf("%s: the step's gradient copies %v, want %v", c.name, flat, c.flat)
		}
		if rs, want := commBytes(rep, "reduce_scatter"), int64(2*7_500_000_000); rs != want {
			t.Errorf("%s: reduce_scatter %d B, want %d (bf16)", c.name, rs, want)
		}
	}
}

// TestZeroGradAccumZeros: ZeRO-2 makes the zero gradients of the
// partition's unreached parameters in the accumulation dtype
// (get_all_grad_tensors: zeros_like(tensor, dtype=dtype), stage_1_and_2.py
// l.2106-2114), on the tiny Qwen2.5-VL without images of
// TestZeRO2ZeroGradients (DP 2): 79,968 elements of the idle vision tower,
// 319,872 B in fp32 where bf16 mode makes 159,936. Its list then holds an
// fp32 tensor, so the step's torch.cat of it is fp32 (type promotion):
// the rank's partition flattened straight into the master's dtype, no
// second copy.
func TestZeroGradAccumZeros(t *testing.T) {
	mixed, _ := core.LookupPrecision("bf16-mixed")
	for _, c := range []struct {
		prec  core.Precision
		zeros string
		casts int // the step's copies of the flat partition into fp32
	}{
		{accumPrecision, "[backward:319872]", 0},
		{mixed, "[backward:159936]", 1},
	} {
		p := visionPlan(t, "qwen2.5-vl-tiny.json", hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 198_304, "fp32")
		p.Precision, p.Parallel = c.prec, core.Parallelism{DP: 2, Zero: 2}
		rep, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		allocs, _, _ := zeroTensorEvents(rep, "zero gradients")
		casts := 0
		for _, e := range rep.Trace.Events {
			if e.Action == "alloc" && strings.HasSuffix(e.Tensor, "fp32 gradient partition") {
				casts++
			}
		}
		if fmt.Sprint(allocs) != c.zeros || casts != c.casts {
			t.Errorf("%s: zero gradients %v, %d fp32 copies of the flat partition; want %s, %d", c.prec.Name, allocs, casts, c.zeros, c.casts)
		}
	}
}

// TestZeroGradAccumPlans: what a ZeRO plan's grads= other than its
// params' runs as: stage 2 with offload_optimizer reads no
// grad_accum_dtype (its plan is bf16 mode's: the 16-bit gradient
// partition, 2 x 937,500,000 B on the 7.5B stack); stage 1 of a bf16
// model is BF16_Optimizer (TestZeroBF16Optimizer's 45,000,000,000 B of
// gradients), with an fp32 master only; stage 1's grad_accum attribute
// (fp16, offloaded) and the dtypes DeepSpeed does not accumulate in are
// refused with a hint.
func TestZeroGradAccumPlans(t *testing.T) {
	fp16 := accumPrecision
	fp16.Params, fp16.Compute = units.FP16, units.FP16
	bf16Master := accumPrecision
	bf16Master.Master, bf16Master.States = units.BF16, units.BF16
	narrow := accumPrecision
	narrow.Params, narrow.Compute, narrow.Grads = units.FP32, units.FP32, units.BF16
	for _, c := range []struct {
		name    string
		zero    int
		offload bool
		prec    core.Precision
		grads   int64
		refused string
	}{
		{"zero 2 offloaded", 2, true, accumPrecision, 1_875_000_000, ""},
		{"zero 3 fp16 model", 3, false, fp16, 3_750_000_000, ""},
		{"zero 1 bf16 model: BF16_Optimizer", 1, false, accumPrecision, 45_000_000_000, ""},
		{"zero 1 bf16 model, bf16 master", 1, false, bf16Master, 0, "whose master partition is fp32"},
		{"zero 1 fp16 model", 1, false, fp16, 0, "keeps a grad_accum copy of each parameter"},
		{"zero 1 offloaded", 1, true, accumPrecision, 0, "keeps a grad_accum copy of each parameter"},
		{"bf16 gradients of an fp32 model", 3, false, narrow, 0, "memsh replays as fp32 beside a bf16 or fp16 model only"},
	} {
		p := distPlan(t, linearStack(30, 5000, 25000), "bf16-mixed", core.Parallelism{DP: 8, Zero: c.zero})
		p.Precision = c.prec
		if c.offload {
			p.Offload = &core.Offload{Optimizer: "cpu"}
		}
		rep, err := Evaluate(p, core.Options{})
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("%s: %v, want the refusal %q", c.name, err, c.refused)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if rep.States.Grads != c.grads {
			t.Errorf("%s: gradient states %d B, want %d", c.name, rep.States.Grads, c.grads)
		}
	}
}

// TestZeroBF16Optimizer: ZeRO-1 with a bf16 model accumulating in fp32 is
// DeepSpeed's BF16_Optimizer (bf16_optimizer.py at edaa722, defaults), on
// the 7.5B stack of TestZeroGradAccum (60 parameters of 125,000,000
// elements, 8 ranks: the flat group, aligned to 16, is 7,500,000,000
// elements, no padding), hand-counted:
//
//   - fp32_groups_gradients_flat, the whole group in fp32, from setup:
//     30,000,000,000 B; autograd's bf16 param.grad, whole, kept to the
//     step: 15,000,000,000 B (States.Grads: both);
//   - the backward's epilogue casts each gradient to fp32 before adding
//     it in (update_hp_grads): 60 copies of 500,000,000 B, one at a time;
//     the boundary's all-reduce casts the fp32 group to bf16
//     (allreduce_bucket): one copy of 15,000,000,000 B; the collective
//     carries those 15,000,000,000 B, where ZeRO-1's reduce-scatter
//     carries the same bytes of the 16-bit gradients;
//   - the step hands the optimizer a view of the buffer: no flat copy;
//   - the peak is that all-reduce: the bf16 flat parameters
//     (15,000,000,000), the fp32 master partition (937,500,000 x 4 =
//     3,750,000,000) and moments (7,500,000,000 and fused AdamW's 4-byte
//     step), both gradient copies (45,000,000,000) and the bf16 copy
//     (15,000,000,000): 86,250,000,004 B, with the cuBLAS workspace
//     (67,108,864 B: cublas.go) 86,317,108,868 B; the allocator's
//     rounding and the batch's few KB add under 4 MiB.
//
// With grad_accum = 2 the earlier micro-batch's bf16 gradients are held
// from setup (zeroed in place by the next backward's prologue).
func TestZeroBF16Optimizer(t *testing.T) {
	for _, accum := range []int64{1, 2} {
		p := distPlan(t, linearStack(30, 5000, 25000), "bf16-mixed", core.Parallelism{DP: 8, Zero: 1})
		p.Precision, p.GradAccum = accumPrecision, accum
		p.Optimizer.Impl = "fused"
		rep, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		if rep.States.Grads != 45_000_000_000 {
			t.Errorf("accum %d: gradient states %d B, want 45,000,000,000", accum, rep.States.Grads)
		}
		fp32, _, _ := zeroTensorEvents(rep, "dense fp32_groups_gradients_flat")
		casts, _, castMost := zeroTensorEvents(rep, "gradient in fp32")
		copies, _, _ := zeroTensorEvents(rep, "dense all-reduce copy")
		if fmt.Sprint(fp32) != "[setup:30000000000]" || len(casts) != 60 || castMost != 500_000_000 || fmt.Sprint(copies) != "[backward:15000000000]" {
			t.Errorf("accum %d: fp32 buffer %v, %d casts (%d B at most live), all-reduce copies %v; want [setup:30000000000], 60 of 500000000 B one at a time, [backward:15000000000]",
				accum, fp32, len(casts), castMost, copies)
		}
		for _, e := range rep.Trace.Events {
			if e.Action == "alloc" && strings.HasSuffix(e.Tensor, "gradient partition") {
				t.Errorf("accum %d: the step copies %s (%d B); BF16_Optimizer steps a view", accum, e.Tensor, e.Size)
			}
		}
		if ar, ag, rs := commBytes(rep, "all_reduce"), commBytes(rep, "all_gather"), commBytes(rep, "reduce_scatter"); ar != 15_000_000_000 || ag != 15_000_000_000 || rs != 0 {
			t.Errorf("accum %d: all_reduce %d B, all_gather %d B, reduce_scatter %d B; want 15e9, 15e9, 0", accum, ar, ag, rs)
		}
		if peak := rep.PeakAllocated; peak < 86_317_108_868 || peak > 86_317_108_868+4<<20 {
			t.Errorf("accum %d: peak allocated %d B, want 86,317,108,868 and under 4 MiB more", accum, peak)
		}
	}
}

// TestZeroBF16OptimizerExposed: BF16_Optimizer registers no gradient hook
// (immediate_grad_update off): its all-reduce runs after the backward
// (engine.py _backward_epilogue) with overlap_comm or without, so its
// dp_comm is the same either way, where ZeRO-1's overlapped reduction
// hides behind the boundary's backward (the 7.5B stack, 8 ranks, 4
// micro-batches).
func TestZeroBF16OptimizerExposed(t *testing.T) {
	mixed, _ := core.LookupPrecision("bf16-mixed")
	dp := func(prec core.Precision, overlap bool) float64 {
		p := distPlan(t, linearStack(30, 5000, 25000), "bf16-mixed", core.Parallelism{DP: 8, Zero: 1, OverlapComm: overlap})
		p.Precision, p.GradAccum, p.Batch, p.Seq = prec, 4, 8, 2048
		return stepShare(evalPlan(t, p), "dp_comm")
	}
	if on, off := dp(accumPrecision, true), dp(accumPrecision, false); on <= 0 || on != off {
		t.Errorf("BF16_Optimizer: dp_comm %g s with overlap_comm, %g s without; want the same", on, off)
	}
	if on, off := dp(mixed, true), dp(mixed, false); on >= off {
		t.Errorf("ZeRO-1 in bf16 mode: dp_comm %g s with overlap_comm, %g s without; want less", on, off)
	}
}
