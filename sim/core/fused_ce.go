package core

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
