package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// titanTPPlan is chunkedLossPlan's ChunkedLossWrapper (8 chunks of n =
// 256 of T = 2,048 tokens) over tp = 2 as torchtitan runs it: DTensor's
// tensor parallelism, sequence parallel or not, the loss under torch's
// loss_parallel().
func titanTPPlan(sp bool) *core.Plan {
	p := chunkedLossPlan(core.TitanLoss, 8)
	p.Parallel = core.Parallelism{TP: 2, LossParallel: "torch", TPRuntime: "torch", SequenceParallel: sp}
	return p
}

// TestTitanChunkedLossTP counts ChunkedLossWrapper under tensor
// parallelism by hand (torchtitan/components/loss.py at b5bcd76c6, "TP /
// SP composability"), each rank's vocabulary shard V/tp = 16,000:
//
//   - the final norm's output replicated (the sequence-parallel
//     all-gather: T x D bf16 2,097,152, the 1,048,576 shard freed); every
//     rank chunks all T rows, so GradAccumulator's fp32 buffer is T x D,
//     4,194,304, as on one GPU;
//   - a chunk's logits n x V/tp bf16: L16 = 8,192,000; pred.float() L32 =
//     16,384,000;
//   - the chunk's loss under loss_parallel (TestTorchLossParallel's fp32
//     case): log-probabilities L32 and the loss (4) kept, the shifted
//     logits or their exponentials L32 beside them, then the fp32 copy
//     goes; its fused backward: the returned gradient, grad_input and
//     exp(result) (L32 each), then the saved result goes;
//   - ToCopyBackward L16; lm_head's backward: the chunk's input gradient n
//     x D bf16 262,144 (a partial sum over the shards) and the weight's
//     shard V/tp x D bf16, 16,384,000 (the first chunk; the others add a
//     temporary of that size in place);
//   - after the loop as on one GPU: .to(bf16) T x D 2,097,152.
//
// Collectives: three all-reduces of the chunk's n fp32 row values (the
// max, the sum of exponentials, the target's logit: 1,024 B) a chunk,
// in the forward; the accumulated gradient is reduced once at the
// decoder: the gather's reduce-scatter with sequence parallelism, one
// backward all-reduce of T x D bf16 (2,097,152 B) without, beside the
// ten of the layers' column-parallel linears (q, k, v, gate, up of two
// layers).
func TestTitanChunkedLossTP(t *testing.T) {
	const l16, l32 = 8_192_000, 16_384_000
	r, err := Evaluate(titanTPPlan(true), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	checkOpEvents(t, r.Trace, []opEventCase{
		{"sp_all_gather", replay.PhaseForward, []int64{2_097_152, -1_048_576}},
		{"loss.grad_accumulator", replay.PhaseForward, []int64{4_194_304}},
		{"loss.logits_0", replay.PhaseForward, []int64{l16}},
		{"loss.to_fp32_0", replay.PhaseForward, []int64{l32}},
		{"loss.cross_entropy_0", replay.PhaseForward, []int64{l32, 4, l32, -l32, -l32}},
		{"loss.cross_entropy_backward_0", replay.PhaseForward, []int64{l32, 2 * l32, -2 * l32, -l32}},
		{"loss.to_copy_backward_0", replay.PhaseForward, []int64{l16, -l32}},
		{"loss.lm_head_backward_0", replay.PhaseForward, []int64{262_144, l32, -l16}},
		{"loss.lm_head_backward_1", replay.PhaseForward, []int64{262_144, l32, -l32, -l16}},
		{"loss.accumulated_grad", replay.PhaseForward, []int64{2_097_152, -4_194_304, -l16}},
		{"loss.chunked_loss", replay.PhaseBackward, []int64{-2_097_152, -l32, 2_097_152, l32, -4}},
	})
	for _, sp := range []bool{true, false} {
		prog := lower(t, titanTPPlan(sp))
		var rowReduces, gradReduces int
		for _, c := range prog.Comm {
			switch {
			case c.Kind == "all_reduce" && !c.Backward && c.Bytes == 1024:
				rowReduces++
			case c.Kind == "all_reduce" && c.Backward && c.Bytes == 2_097_152:
				gradReduces++
			}
		}
		want := 0
		if !sp {
			want = 11
		}
		if rowReduces != 24 || gradReduces != want {
			t.Errorf("sp %v: %d forward all-reduces of a chunk's rows, want 24; %d backward all-reduces of T x D bf16, want %d",
				sp, rowReduces, gradReduces, want)
		}
	}
}

// TestTitanTPNeedsLossParallel: under tp the chunks' loss is modelled as
// torchtitan runs it (loss_parallel="torch"); Megatron's vocabulary-
// parallel cross-entropy is not what the wrapper calls.
func TestTitanTPNeedsLossParallel(t *testing.T) {
	p := titanTPPlan(true)
	p.Parallel.LossParallel = ""
	_, err := Evaluate(p, core.Options{})
	if err == nil || !strings.Contains(err.Error(), "vocabulary-parallel loss torchtitan runs") {
		t.Errorf("got %v, want the loss_parallel refusal", err)
	}
}
