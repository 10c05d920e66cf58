package sim

import (
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/replay"
)

// zeroTensorEvents sums a step's trace for tensor: its allocations by
// phase, as "phase:bytes" in trace order, where they happened, and the
// most bytes of it live at once.
func zeroTensorEvents(rep *replay.Report, tensor string) (allocs []string, ops []string, most int64) {
	var live int64
	for _, e := range rep.Trace.Events {
		if e.Tensor != tensor {
			continue
		}
		switch e.Action {
		case "alloc":
			allocs = append(allocs, fmt.Sprintf("%v:%d", e.Phase, e.Size))
			ops = append(ops, e.Op)
			live += e.Size
			most = max(most, live)
		case "free_completed":
			live -= e.Size
		}
	}
	return allocs, ops, most
}

// TestZeRO2GradientPartitions: DeepSpeed ZeRO-2 and ZeRO-1 (deepspeed/runtime/zero/
// stage_1_and_2.py at edaa722, defaults) on the 7.5B stack of
// TestZeROStates (30 blocks of two 125,000,000-element linears, fp16
// gradients), 8 ranks, hand-counted:
//
//   - each partition is 937,500,000 elements, 7.5 parameters; every rank
//     overlaps 8, so the replay follows the last, [52.5 P, 60 P): layers
//     26 to 29, whose 8 parameters' gradients grads_in_partition holds
//     whole (copy_grads_in_partition, l.1650-1689): 2,000,000,000 bytes;
//   - the reduce bucket takes 500,000,000 elements, four gradients: the
//     hook of the fifth (layers.27.down.weight's, the backward going
//     from the last layer) reduces layers 28 and 29's four
//     (reduce_independent_p_g_buckets_and_remove_grads, l.1193-1253)
//     and copies them into a grads_in_partition allocated then; 15
//     reductions in all, the last in the epilogue. A bucket's flattened
//     copy (allreduce_bucket, 0.19.8 l.2359-2400), 1,000,000,000 bytes,
//     is made only where it holds slices of two partitions: the 7 buckets
//     a partition boundary (7.5 P, 15 P, ..., 52.5 P) falls in, parameters
//     [52, 56) to [4, 8), reduced at the hooks of layers.25.down,
//     layers.21.down, ..., layers.1.down; the other 8 lie in one partition
//     and are reduced as a view (sim/zero_reduce_test.go measured it);
//   - with grad_accum = 2 the micro-batch before the replayed one left its
//     grads_in_partition held (all_grad_tensors, the epilogue l.919-969),
//     and the replayed one allocates its own at its first reduction
//     (_release_ipg_buffers, l.828-835, dropped the reference), adds it
//     into the kept one in its epilogue and frees it: two partitions
//     live, 4,000,000,000 bytes, from layers.27.down to the backward's
//     end. Before, memsh held one partition from setup: it did not count
//     the partition twice but missed the second.
//
// Stage 1 reduces nothing until the accumulation boundary, the replayed
// micro-batch: after its backward (at layers.0.up, the last gradient)
// reduce_gradients passes every gradient through the same 15 buckets and
// the same grads_in_partition (stage_1_and_2.py l.861-884, reduce_ipg_grads'
// stage-1 branch); autograd's gradients, 15,000,000,000 bytes, are what it
// holds between micro-batches.
func TestZeRO2GradientPartitions(t *testing.T) {
	for _, tc := range []struct {
		zero   int
		accum  int64
		allocs string
		most   int64
		at     string // where the backward's grads_in_partition is allocated, the first reduction
		copy   string // where the first flattened copy is made
		last   string // and the last
	}{
		{2, 1, "[backward:2000000000]", 2_000_000_000, "layers.27.down", "layers.25.down", "layers.1.down"},
		{2, 2, "[setup:2000000000 backward:2000000000]", 4_000_000_000, "layers.27.down", "layers.25.down", "layers.1.down"},
		{1, 1, "[backward:2000000000]", 2_000_000_000, "layers.0.up", "layers.0.up", "layers.0.up"},
		{1, 2, "[backward:2000000000]", 2_000_000_000, "layers.0.up", "layers.0.up", "layers.0.up"},
	} {
		p := distPlan(t, linearStack(30, 5000, 25000), "fp16-master", core.Parallelism{DP: 8, Zero: tc.zero})
		p.GradAccum = tc.accum
		rep, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		allocs, ops, most := zeroTensorEvents(rep, "grads_in_partition")
		if fmt.Sprint(allocs) != tc.allocs || most != tc.most || ops[len(ops)-1] != tc.at {
			t.Errorf("zero %d accum %d: grads_in_partition allocated %v at %v, at most %d B live; want %s, the last at %s, %d B",
				tc.zero, tc.accum, allocs, ops, most, tc.allocs, tc.at, tc.most)
		}
		reduced, rops, _ := zeroTensorEvents(rep, "reduced bucket")
		if len(reduced) != 7 || reduced[0] != "backward:1000000000" || rops[0] != tc.copy || rops[6] != tc.last {
			t.Errorf("zero %d accum %d: reduced buckets %v at %v; want 7 of 1000000000 B, from %s to %s", tc.zero, tc.accum, reduced, rops, tc.copy, tc.last)
		}
		grads := int64(2_000_000_000) // grads_in_partition
		if tc.zero == 1 {
			grads = 2 * 7_500_000_000 // autograd's param.grad, whole, between micro-batches
		}
		if rep.States.Grads != grads {
			t.Errorf("zero %d accum %d: gradient states %d B, want %d", tc.zero, tc.accum, rep.States.Grads, grads)
		}
	}
}

// TestZeRO2ZeroGradients: the zeros_like gradients ZeRO-2's epilogue makes
// for the parameters of the rank's partition the step gives none
// (get_all_grad_tensors, stage_1_and_2.py l.2106-2114 at edaa722), on the
// tiny Qwen2.5-VL without images (fp32, DP 2): the first rank's partition
// holds 79,968 elements of the idle vision tower (hand-counted in
// TestIdleTowerZeROAccumulatedGradients), 319,872 bytes. One micro-batch
// makes them at the end of the backward and keeps them to the step;
// with grad_accum = 2 the earlier micro-batch's are held from setup and
// the replayed one's are made and dropped in its epilogue, after being
// added in.
func TestZeRO2ZeroGradients(t *testing.T) {
	for _, tc := range []struct {
		accum  int64
		allocs string
		most   int64
	}{
		{1, "[backward:319872]", 319_872},
		{2, "[setup:319872 backward:319872]", 2 * 319_872},
	} {
		p := visionPlan(t, "qwen2.5-vl-tiny.json", hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 198_304, "fp32")
		p.Parallel, p.GradAccum = core.Parallelism{DP: 2, Zero: 2}, tc.accum
		rep, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		allocs, _, most := zeroTensorEvents(rep, "zero gradients")
		if fmt.Sprint(allocs) != tc.allocs || most != tc.most {
			t.Errorf("accum %d: zero gradients allocated %v, at most %d B live; want %s, %d B", tc.accum, allocs, most, tc.allocs, tc.most)
		}
		freed := 0
		for _, e := range rep.Trace.Events {
			if e.Tensor == "zero gradients" && e.Action == "free_completed" && e.Phase == replay.PhaseOptimizer {
				freed++
			}
		}
		if freed != 1 {
			t.Errorf("accum %d: the step frees %d zero gradients, want the one kept", tc.accum, freed)
		}
	}
}
