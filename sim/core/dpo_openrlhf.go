package core

import "github.com/memsh/memsh/sim/units"

// The log-probabilities of OpenRLHF's DPO step (Preference.Trainer
// TrainerOpenRLHF; openrlhf/trainer/dpo_trainer.py concatenated_forward
// and _get_batch_logps, openrlhf/models/actor.py Actor.forward and
// models/utils.py log_probs_from_logits at OpenRLHF/OpenRLHF v0.11.0,
// 3c3be62). The policy and the reference are each an Actor, the
// reference a second model (a DeepSpeed inference engine) even under
// LoRA. Actor.forward calls the model without labels, rebinds
// output["logits"] to its fp32 copy (.to(torch.float32)), and scores
// every position against torch.roll(sequences, -1) with flash-attn's
// triton cross_entropy_loss over the whole logits (flash-attn 2.8.3,
// flash_attn/ops/triton/cross_entropy.py: it returns each row's loss and
// z-loss, saves the logits it read, the log-sum-exp and the labels, and
// its backward writes the logits' gradient into a new tensor,
// inplace_backward False); the log-probabilities are -losses, sliced
// [:, :-1]. _get_batch_logps clones the attention mask to bool, masks
// the prompt, and sums (per_token_logps * loss_masks) per row, and again
// divided by the mask's count (the means of the NLL term). The outputs
// go with concatenated_forward's locals: the policy's fp32 logits stay
// only as the cross-entropy's saved input, the reference's (under
// no_grad) are freed once scored. The labels are memsh's labels input
// (int64 [rows, seq]), which the roll makes.

// openrlhfLogProbs lowers Actor.forward's log-probabilities of logits x
// ([rows, seq, V]) and _get_batch_logps' sums per row; nothing is held
// to the loss but the sums.
func (b *Builder) openrlhfLogProbs(x Value) (Value, []Value) {
	logits := b.Cast(x, units.FP32, `output["logits"].to(torch.float32) (OpenRLHF's Actor.forward)`)
	labels := b.Labels(x)
	s := b.Shape(logits)
	seq := s[len(s)-2]
	rows := Rows(s) / seq
	n := rows * seq
	defer b.Scope("log_probs")()
	i := b.AddOp("cross_entropy", FlashCE, []Value{logits, labels})
	losses := b.Out(i, "losses", []int64{n}, units.FP32, "each position's loss (flash-attn's triton cross_entropy_loss)")
	zl := b.Out(i, "z_losses", []int64{n}, units.FP32, "each position's z-loss (0 at lse_square_scale 0), returned and dropped")
	b.Val(zl).Grad = false
	lse := b.Out(i, "lse", []int64{n}, units.FP32, "log-sum-exp of each position (saved)")
	b.Val(lse).Grad = false
	b.Save(i, logits, lse, labels)
	b.Op(i).Flops = 5 * float64(Numel(s))
	lp := b.Ew("neg", "log_probs", []Value{losses}, []int64{rows, seq}, units.FP32, "-losses: each position's log-probability (log_probs_from_logits)")
	shifted := []int64{rows, seq - 1}
	im := b.AddOp("clone", "loss_masks", nil)
	b.Op(im).NoGradB = true
	mask := b.Out(im, "loss_masks", []int64{rows, seq}, units.BOOL, "attention_mask.clone().bool(), the prompt masked (_get_batch_logps; saved by the masked products)")
	var sums []Value
	for _, part := range []string{"sum", "mean"} { // logprobs_sums, then logprobs_means
		prod := b.Ew("mul", "masked_"+part, []Value{lp, mask}, shifted, units.FP32, "per_token_logps * loss_masks[:, 1:]")
		b.Save(b.Val(prod).Producer, mask)
		is := b.AddOp("sum", "logps_"+part, []Value{prod})
		sums = append(sums, b.Out(is, "logps_"+part, []int64{rows}, units.FP32, "each row's "+part+" of its masked log-probabilities"))
	}
	// the means are the NLL term's, which the loop drops before the
	// backward at --model.nll_loss_coef 0 (nll_loss = 0): no gradient
	return sums[0], nil
}
