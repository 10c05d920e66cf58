package core

import "github.com/memsh/memsh/sim/units"

// torchLossParallel is the cross-entropy of vocabulary-sharded logits x
// ([T, V/tp]) under torch's loss_parallel() (torch/distributed/tensor/
// parallel/loss.py, PyTorch 2.4 on; torchtitan runs it whenever tp > 1
// unless training.disable_loss_parallel). It is eager DTensor code that
// allocates what Megatron's in-place version does not:
//
//   - forward (_log_softmax, after torch._decomp's): the input in the
//     computation dtype (x.to(float32), a copy unless x is fp32 already),
//     shifted = x - max, exp(shifted) for the sum, then result = shifted -
//     logsumexp, cast back to x's dtype. Beyond the input, two fp32 tensors
//     of the logits' size are live at once (three with the copy); the
//     result is what autograd saves, and nll_loss's gather reads it.
//   - backward (_nll_loss_and_log_softmax_backward, log_softmax's backward
//     fused into nll_loss's): grad_input = zeros_like(result), the target
//     entries set to -1, then (grad_input + exp(result)) * grad_output:
//     beside the saved result, grad_input, exp (then the sum) and the
//     returned gradient are live at once, each of the result's size.
//
// Three all-reduces of T values over tp (the max, the sum of
// exponentials, the target's logit), as Megatron's. The labels are the
// batch's, replicated over tp (torchtitan's train step loads them with
// the inputs and keeps them for the step; the backward reads them to set
// the target entries): the int64 targets of every token, which
// tools/oracle/fsdp_live.py found missing here (sim/fsdp_live_test.go).
func (b *Builder) torchLossParallel(x Value) Value {
	shape := b.Shape(x)
	i := b.AddOp("cross_entropy", "loss_parallel_cross_entropy", []Value{x})
	lsm := b.Out(i, "log_probs", shape, b.Dtype(x), "log_softmax of the logits shard (loss_parallel: saved for its fused backward)")
	b.Val(lsm).Grad = false
	lab := b.Labels(x)
	loss := b.Out(i, "loss", nil, units.FP32, "loss")
	b.Save(i, lsm, lab)
	e32 := units.FP32.Bytes(Numel(shape))
	work := 2 * e32 // shifted, then exp(shifted) or the result
	if b.Dtype(x) != units.FP32 {
		work += e32 // the fp32 copy of the input
	}
	b.Op(i).WorkF = work - b.Val(lsm).Bytes
	b.Op(i).WorkB = 2 * b.Val(lsm).Bytes // grad_input and exp(result), then their sum
	b.Op(i).WorkBParts = 2
	b.Op(i).Flops = 5 * float64(Numel(shape))
	t := Rows(shape)
	for range 3 {
		b.RecordComm("all_reduce", "tp", units.FP32.Bytes(t), false)
	}
	return loss
}
