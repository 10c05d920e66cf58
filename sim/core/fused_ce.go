package core

import "github.com/memsh/memsh/sim/units"

// TEParallelCE is the loss_parallel name of Transformer Engine's
// parallel_cross_entropy, Megatron's loss under --cross-entropy-loss-fusion
// with --cross-entropy-fusion-impl te (teParallelCE).
const TEParallelCE = "te"

// TEParallelCEOp is its op name (timing/log_softmax.go prices it by it).
const TEParallelCEOp = "te_parallel_cross_entropy"

// MegatronFusedCE is the loss_parallel name of Megatron's vocabulary-
// parallel cross-entropy under --cross-entropy-loss-fusion
// (Parallelism.LossParallel).
const MegatronFusedCE = "megatron_fused"

// FusedVocabParallelCE is the op name of the fused loss
// (timing/log_softmax.go prices its passes by it).
const FusedVocabParallelCE = "fused_vocab_parallel_cross_entropy"

// fuseVocabParallelCE turns op i, Megatron's vocabulary-parallel
// cross-entropy (vocabParallelCE), into its --cross-entropy-loss-fusion
// form: fused_vocab_parallel_cross_entropy (megatron/core/fusions/
// fused_cross_entropy.py at core_r0.11.0 and core_r0.13.0, the "native"
// implementation, Megatron's default --cross-entropy-fusion-impl), the
// same steps as four functions under megatron.core.jit.jit_fuser, which is
// torch.compile from torch 2.2 on (megatron/core/jit.py).
//
// The forward holds what the eager loss holds: Inductor writes the
// in-place steps (the max subtracted, exp, the division) straight into
// the fp32 copy of the logits. The backward does not: the gradient's
// indexed subtraction (grad_2d[arange, target] -= 1 - mask) on the saved
// softmax, a graph input the function mutates, is lowered as index_put_
// on a clone of it (torch/_inductor/lowering.py, index_put:
// index_put_(clone(x), ...), l.3361 at v2.6.0), so an fp32 buffer of the
// whole shard is allocated beside the saved softmax and the bf16 gradient
// the function returns, then freed with the call. Read from Inductor's
// output code for the four functions on the CPU (TORCH_LOGS=output_code,
// torch 2.6.0 and 2.15: the same buffers in both; the lowering is the
// same for CUDA): 4 bytes a logit more at the loss's backward than the
// eager loss.
func (b *Builder) fuseVocabParallelCE(i int32, softmax Value) {
	op := b.Op(i)
	op.WorkB = b.Val(softmax).Bytes
	op.Work = &WorkTensors{B: []int64{b.Val(softmax).Bytes}}
}

// teParallelCE lowers Transformer Engine's parallel_cross_entropy
// (transformer_engine/pytorch/cross_entropy.py and triton/cross_entropy.py
// at release_v2.3), which Megatron-Core runs under
// --cross-entropy-fusion-impl te (language_module.py compute_language_
// model_loss at core_r0.13.0; Megatron-Bridge's Qwen3-MoE and DeepSeek
// recipes set it). Two Triton kernels a row: an online softmax writes each
// row's max, sum and target logit (three fp32 a row; all-gathered over
// the tp group), then the loss kernel writes the loss (fp32 a row) and
// the gradient into the logits themselves, in their dtype; the forward
// saves the logits (now the gradient) and no fp32 copy of them is ever
// made. The backward scales them in place by the incoming gradient
// (element_mul_kernel) and returns them: the saved logits become the
// logits' gradient (GradsInForward).
func (b *Builder) teParallelCE(x Value) Value {
	lab, local := b.megatronLabels(x)
	i := b.AddOp("cross_entropy", TEParallelCEOp, []Value{x, lab})
	rows := Rows(b.Shape(x))
	tp := max(b.Par.Tpn(), 1)
	mdxy := b.Out(i, "m_d_X_y", []int64{3 * rows}, units.FP32, "each row's max, sum of exponentials and target logit (online_softmax_kernel)")
	b.Val(mdxy).Grad = false
	if tp > 1 {
		g := b.Out(i, "m_d_X_y_gathered", []int64{3 * rows * tp}, units.FP32, "m_d_X_y all-gathered over the tp group")
		b.Val(g).Grad = false
	}
	loss := b.Out(i, "loss", []int64{rows}, units.FP32, "loss a row (loss_1d)")
	b.Save(i, x)
	op := b.Op(i)
	op.GradsInForward = true
	op.Flops = 5 * float64(Numel(b.Shape(x)))
	if tp > 1 {
		b.RecordComm("all_gather", "tp", units.FP32.Bytes(3*rows*tp), false)
	}
	if local != NoValue {
		b.Release("labels", []Value{local}) // compute_language_model_loss's local, freed when it returns
	}
	return loss
}
