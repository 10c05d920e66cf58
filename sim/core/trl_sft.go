package core

import (
	"github.com/memsh/memsh/sim/units"
)

// TRLHead is the Plan.FusedLoss spelling of TRL's fused LM head as its
// SFTTrainer runs it (train(loss_chunks="trl"); TRL 1.15 and later, 1.16.0
// read): SFTTrainer.__init__ calls add_fused_lm_head(outputs=("log_probs",
// "entropy", "is_top1")) on the model and its compute_loss calls
// model(**inputs, fused_lm_head=True), so the logits are never made
// (trl_fused_head.go); the loss is -log_probs summed over the tokens and
// divided by their count (per_token_loss.sum() / num_tokens), the entropy
// and the argmax hits feed the logged metrics under no_grad, and the
// output holding them is dropped when compute_loss returns, before the
// backward.
const TRLHead = "trl"

// validateTRLHead checks a plan asking for TRL's fused LM head.
func (p *Plan) validateTRLHead() error {
	const what = `loss_chunks="trl"`
	if err := p.fusedHeadRefusal(); err != nil {
		return err
	}
	par := p.Parallel.Norm()
	switch {
	case par.TP > 1 || par.PP > 1 || par.CP > 1:
		return &units.Error{Path: "train", Msg: what + " with tensor, pipeline or context parallelism is not modelled",
			Hint: "drop tp, pp and cp, or drop loss_chunks"}
	case par.Zero >= 3 || par.FSDP:
		return &units.Error{Path: "train", Msg: what + " under ZeRO-3 or FSDP is not modelled (the head reads lm_head.weight outside lm_head's forward: DeepSpeed's GatheredParameters, FSDP2's full_tensor())",
			Hint: "use ddp or parallel(zero=1 or 2), or drop loss_chunks"}
	}
	return nil
}

// trlHead reports whether the plan runs the model's head and loss as
// TRL's fused LM head.
func (ft *Finetune) trlHead(m *Model) bool {
	return ft != nil && ft.trl && m.Vocab > 0 && (m.Loss == "" || m.Loss == "cross_entropy")
}

// trlModelLoss lowers SFTTrainer's loss over TRL's fused LM head on x (the
// last hidden states) and returns the loss.
func (b *Builder) trlModelLoss(m *Model, x Value) Value {
	lp, mask, metrics := b.trlFusedLogProbs(m, x, trlOutputs{entropy: true, top1: true})
	defer b.Scope("loss")()
	in := b.AddOp("neg", "per_token_loss", []Value{lp})
	ptl := b.Out(in, "per_token_loss", b.Shape(lp), units.FP32, "-outputs.log_probs: each token's loss, zero where the label is ignored")
	// num_tokens = torch.as_tensor(label_mask.sum()).clamp(min=1): an
	// int64 scalar, which the division's DivBackward0 saves (measured:
	// TestTRLSFTHeadSavedAsTRL).
	ic := b.AddOp("sum", "num_tokens", []Value{mask})
	b.Op(ic).NoGradB = true
	nt := b.Out(ic, "num_tokens", nil, units.INT64, "torch.as_tensor(label_mask.sum()).clamp(min=1): the count the loss divides by (saved)")
	b.Val(nt).Grad = false
	// sum() / num_tokens: SumBackward0 hands an expanded view of the
	// gradient back (nothing allocated); the output's entropy, argmax hits
	// and label mask are held until compute_loss returns.
	is := b.AddOp("sum", "loss", append([]Value{ptl, mask, nt}, metrics...))
	b.Op(is).NoGradB = true
	loss := b.Out(is, "loss", nil, units.FP32, "loss (per_token_loss.sum() / num_tokens)")
	b.Save(is, nt)
	return loss
}
