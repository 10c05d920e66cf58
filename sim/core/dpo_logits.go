package core

import "github.com/memsh/memsh/sim/units"

// The log-probabilities of torchtune's and LLaMA-Factory's DPO steps
// (Preference.Trainer), which log_softmax the whole logits at once in
// fp32:
//
//   - torchtune (recipes/lora_dpo_single_device.py, lora_dpo_distributed.py
//     and full_dpo_distributed.py at pytorch/torchtune bd2a0fc):
//     TransformerDecoder.forward returns self.output(h).float(), and
//     rlhf.get_batch_log_probs (rlhf/_sequence_processing.py) clones the
//     shifted labels (labels[:, 1:].clone()), masks them (labels !=
//     CROSS_ENTROPY_IGNORE_IDX), and logits_to_logprobs divides the shifted
//     logits by the temperature (a new fp32 tensor; DivBackward0 saves no
//     tensor for a Python scalar), log_softmaxes them (LogSoftmaxBackward0
//     saves its result) and gathers the labels (GatherBackward0 saves the
//     index), then (per_token_log_probs * loss_mask).sum(-1) (MulBackward0
//     saves the mask). The LoRA recipes score the 2 x batch rows at once and
//     keep the reference's ChosenRejectedOutputs, whose logits are views of
//     its fp32 logits, until the next micro-batch rebinds the variable after
//     its policy forward; the full recipe (its reference a copy of the
//     model) scores the chosen and the rejected half in two calls and
//     deletes the reference's logits at once. The policy's logits are
//     deleted after the two means the recipe logs.
//   - LLaMA-Factory (src/llamafactory/train/dpo/trainer.py
//     concatenated_forward and train/trainer_utils.py get_batch_logps at
//     hiyouga/LLaMA-Factory ff6d4d12e): model(...).logits.to(
//     torch.float32), the same clone and mask, logits[:, :-1,
//     :].log_softmax(-1) over the slice, which is not contiguous over more
//     than one row, so the kernel copies it first (host_softmax's
//     input_.contiguous(), aten/src/ATen/native/cuda/SoftMax.cu), the
//     gather and the masked sum. get_batch_loss_metrics keeps the policy's
//     outputs, its fp32 logits among them, until it returns after the loss;
//     the reference's go when compute_reference_log_probs returns.

// wholeLogProbs lowers the log-probabilities of logits x ([rows, seq, V])
// as the plan's trainer computes them, ref when they are the reference's
// (under no_grad), and returns their sums per row and what the trainer
// holds until the loss.
func (b *Builder) wholeLogProbs(x Value, ref bool) (Value, []Value) {
	tt := b.pref.trainer() == TrainerTorchtune
	why := "logits.to(torch.float32) (LLaMA-Factory's concatenated_forward)"
	if tt {
		why = "self.output(h).float() (torchtune's TransformerDecoder.forward)"
	}
	logits := b.Cast(x, units.FP32, why)
	labels := b.Labels(x)
	s := b.Shape(x)
	rows := Rows(s) / s[len(s)-2]
	var sums []Value
	defer b.Scope("log_probs")()
	if tt && b.pref.Reference == RefModel { // full_dpo_distributed.py: the chosen half, then the rejected
		sums = []Value{b.rowLogProbs(logits, labels, rows/2, "chosen."), b.rowLogProbs(logits, labels, rows/2, "rejected.")}
	} else {
		sums = []Value{b.rowLogProbs(logits, labels, rows, "")}
	}
	lp, held := sums[0], sums[1:] // the rejected rows' sums, held apart to the loss
	switch {
	case !tt && !ref: // get_batch_loss_metrics's model_output: until the loss
		return lp, append(held, logits)
	case !tt && b.pref.KTO() && !b.klForward: // stage kto's reference: concatenated_forward's, to its copies (kto.go)
		return lp, append(held, logits)
	case tt && ref && b.pref.Reference == RefAdapters: // reference_chosen_rejected_outputs: until the next micro-batch's
		b.P.Held = append(b.P.Held, logits)
		b.Val(logits).Why = "the reference's fp32 logits, which reference_chosen_rejected_outputs holds until the next micro-batch rebinds it (torchtune's LoRA DPO recipes)"
	default: // deleted, or gone with the function's locals, after the log-probabilities
		b.KeepAlive("logits", logits)
	}
	return lp, held
}

// rowLogProbs lowers get_batch_log_probs (torchtune) or get_batch_logps
// (LLaMA-Factory) over n rows of the fp32 logits and labels, part naming
// the rows ("chosen.", "rejected.", "" for all): the shifted labels'
// clone and mask, the temperature's division (torchtune), log_softmax,
// gather and the masked sum.
func (b *Builder) rowLogProbs(logits, labels Value, n int64, part string) Value {
	s := b.Shape(logits)
	seq, vocab := s[len(s)-2], s[len(s)-1]
	shifted := []int64{n, seq - 1}
	ic := b.AddOp("clone", part+"labels", []Value{labels})
	b.Op(ic).NoGradB = true
	lab := b.Out(ic, part+"labels", shifted, units.INT64, "labels[:, 1:].clone(), the shifted targets (saved by the gather's backward)")
	b.Op(ic).Bytes = 2 * float64(b.Val(lab).Bytes)
	im := b.AddOp("ne", part+"loss_mask", []Value{lab})
	b.Op(im).NoGradB = true
	mask := b.Out(im, part+"loss_mask", shifted, units.BOOL, "labels != the ignored index (saved by the masked sum's backward)")
	b.Op(im).Bytes = float64(b.Val(lab).Bytes + b.Val(mask).Bytes)
	in, work := logits, int64(0)
	full := []int64{n, seq - 1, vocab}
	if b.pref.trainer() == TrainerTorchtune { // logits_to_logprobs: logits / temperature
		in = b.Ew("div", part+"temperature", []Value{logits}, full, units.FP32, "the shifted logits / temperature (logits_to_logprobs), a new fp32 tensor")
	} else if n > 1 { // log_softmax of a slice that is not contiguous: host_softmax copies it
		work = units.FP32.Bytes(Numel(full))
	}
	il := b.AddOp("log_softmax", part+"log_softmax", []Value{in})
	lsm := b.Out(il, part+"log_softmax", full, units.FP32, "F.log_softmax of the rows' shifted fp32 logits, saved for its backward")
	b.Save(il, lsm)
	b.Op(il).WorkF = work
	b.Op(il).Bytes = float64(work + b.Val(lsm).Bytes) // priced by the kernel's passes (timing/log_softmax.go)
	ig := b.AddOp("gather", part+"gather", []Value{lsm, lab})
	tok := b.Out(ig, part+"per_token_logps", []int64{n, seq - 1, 1}, units.FP32, "the targets' log-probabilities (torch.gather)")
	b.Save(ig, lab)
	imul := b.Ew("mul", part+"masked", []Value{tok, mask}, shifted, units.FP32, "per-token log-probabilities times the loss mask")
	b.Save(b.Val(imul).Producer, mask)
	isum := b.AddOp("sum", part+"logps", []Value{imul})
	return b.Out(isum, part+"logps", []int64{n}, units.FP32, "each row's summed log-probability ((per_token_logps * loss_mask).sum(-1))")
}

// referenceBefore is, under torchtune's LoRA DPO recipes, the micro-batch
// before's reference logits ([rows, seq, V] fp32), which
// reference_chosen_rejected_outputs holds from that micro-batch's
// reference forward until this one's policy forward has scored its rows
// (the recipe rebinds the variable there): made before the forward, as
// the steady step finds them. The job's first micro-batch has none;
// memsh's first step counts them too. NoValue otherwise.
func (b *Builder) referenceBefore(m *Model) Value {
	if b.pref.trainer() != TrainerTorchtune || b.pref.Reference != RefAdapters || m.Vocab <= 0 {
		return NoValue
	}
	i := b.AddOp("held", "reference_outputs", nil)
	b.Op(i).NoGradB = true
	return b.Out(i, "reference_logits_before", []int64{b.Batch, b.Seq, m.Vocab}, units.FP32,
		"the micro-batch before's reference logits (fp32), held by reference_chosen_rejected_outputs until this micro-batch's policy has scored its rows (torchtune's LoRA DPO recipes)")
}
