package core

import "github.com/memsh/memsh/sim/units"

// FlashCE is the loss name of flash-attn's fused softmax cross-entropy
// (Model.Loss).
const FlashCE = "flash_cross_entropy"

// flashCrossEntropy lowers flash-attn's CrossEntropyLoss (flash_attn/
// losses/cross_entropy.py at v1.0.9, SoftmaxCrossEntropyLossFn over the
// xentropy_cuda_lib extension, csrc/xentropy/xentropy_kernel.cu), which
// llm-foundry's MPT trains with by default (loss_fn "fused_crossentropy",
// llmfoundry/models/mpt/modeling_mpt.py at 061f2c7). The kernel reads the
// logits in their own dtype (an extension op: autocast does not upcast
// it) and writes one loss and one log-sum-exp (fp32) a row; it saves the
// logits themselves, the log-sum-exp and the labels, and its backward
// writes the logits' gradient into a new tensor (inplace_backward=False).
// The mean over the rows (losses.sum() / (target != ignore_index).sum())
// is a small op of its own. No log-probabilities are ever written.
func (b *Builder) flashCrossEntropy(x Value) Value {
	defer b.LossGraph("cross_entropy")()
	lab := b.Labels(x)
	rows := Rows(b.Shape(x))
	i := b.AddOp("cross_entropy", FlashCE, []Value{x, lab})
	losses := b.Out(i, "losses", []int64{rows}, units.FP32, "per-row losses (xentropy_cuda_lib.forward)")
	lse := b.Out(i, "lse", []int64{rows}, units.FP32, "log-sum-exp of each row (saved)")
	b.Val(lse).Grad = false
	b.Save(i, x, lse, lab)
	b.Op(i).Flops = 5 * float64(Numel(b.Shape(x)))
	is := b.AddOp("sum", "mean", []Value{losses})
	loss := b.Out(is, "loss", nil, units.FP32, "loss")
	b.Op(is).Bytes += float64(b.Val(losses).Bytes)
	return loss
}
