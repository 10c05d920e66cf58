package core

import "github.com/memsh/memsh/sim/units"

// A DPO step as TRL's DPOTrainer runs it (preference.go): the policy's
// forward over the batch's 2 x batch rows, its log-probabilities, then the
// reference model's forward under torch.no_grad() with gradient
// checkpointing disabled (disable_gradient_checkpointing) and its
// log-probabilities, then the loss; the policy's outputs (its logits
// under TRL 1.8, its log-probabilities and label mask under 1.15) and the
// reference's are held by _compute_loss's locals until it returns, before
// the backward. The reference forward saves nothing; what it allocates
// lives on top of everything the policy's forward saved.

// RefForward is the scope the reference forward of the policy's own
// modules (RefAdapters) runs under: its ops and tensors are named
// reference.layers.0..., its parameters are the policy's.
const RefForward = "reference"

// RefCopy is the scope of the reference copy (RefModel): its modules and
// parameters are named ref_model.layers.0...; FSDP2 wraps it as one unit
// of that name (replay/shard_units.go).
const RefCopy = "ref_model"

// dpoLoss lowers the DPO objective after the policy's body: in is the
// batch's input_ids, x what the body returned (the logits under TRL 1.8,
// the last hidden states under 1.15).
func (b *Builder) dpoLoss(m *Model, in, x, before Value) Value {
	pr := b.pref
	policy, held := b.preferenceLogProbs(m, x, false)
	if before != NoValue { // rebound after the policy's log-probabilities (dpo_logits.go)
		b.KeepAlive("reference_outputs", before)
	}
	var ref Value
	switch pr.Reference {
	case RefNone: // a loss without a reference
		ref = NoValue
	case RefPrecomputed:
		ref = b.input("ref_logps", []int64{b.Batch}, units.FP32)
		b.Val(ref).Why = "ref_chosen_logps and ref_rejected_logps of the batch (precompute_ref_log_probs)"
	default:
		var refHeld []Value
		ref, refHeld = b.referenceLogProbs(m, in)
		held = append(held, refHeld...)
	}
	defer b.Scope("loss")()
	ins := []Value{policy}
	if ref != NoValue {
		ins = append(ins, ref)
	}
	i := b.AddOp(PreferenceOp, "dpo_loss", append(ins, held...))
	// The held outputs get no gradient from the loss; the policy's summed
	// log-probabilities get one of [rows] elements (a few bytes), which
	// memsh does not allocate.
	b.Op(i).NoGradB = true
	return b.Out(i, "loss", nil, units.FP32, "the DPO loss: -logsigmoid(beta x the chosen and rejected log-ratios' margin), averaged over the pairs")
}

// preferenceLogProbs lowers the log-probabilities of x's rows as the
// plan's trainer (and TRL release) computes them, ref when they are the
// reference's, and returns their sums per row and what is held until
// the loss.
func (b *Builder) preferenceLogProbs(m *Model, x Value, ref bool) (Value, []Value) {
	if b.pref.trainer() == TrainerOpenRLHF {
		return b.openrlhfLogProbs(x)
	}
	if b.pref.trainer() != TrainerTRL {
		return b.wholeLogProbs(x, ref)
	}
	if b.pref.TRL == TRLLogits {
		return b.trlRowLogProbs(x), []Value{x} // outputs.logits
	}
	var want trlOutputs
	if b.pref.KTO() && !b.refCopy { // the policy's forward, patched with KTOTrainer's outputs (kto.go)
		want = trlOutputs{entropy: true, meanLogits: true}
	}
	lp, mask, more := b.trlFusedLogProbs(m, x, want)
	i := b.AddOp("sum", "logps", []Value{lp})
	s := b.Shape(lp)
	return b.Out(i, "logps", []int64{s[0]}, units.FP32, "each row's summed log-probability (per_token_logps.sum(dim=1))"), append([]Value{lp, mask}, more...)
}

// referenceLogProbs lowers the reference model's forward on the batch's
// input_ids under torch.no_grad() and its log-probabilities: a frozen
// copy of the model (ref_model.*, its own parameters) or the policy's
// modules with the LoRA adapters disabled (the same parameters, no
// adapter ops).
func (b *Builder) referenceLogProbs(m *Model, in Value) (Value, []Value) {
	done := b.NoGrad()
	defer done()
	ckpt, every := b.Ckpt, b.everyBlock
	b.Ckpt = Checkpoint{Mode: "none"} // disable_gradient_checkpointing
	b.everyBlock = true               // lowered, not copied from the policy's blocks (they saved for a backward)
	defer func() { b.Ckpt, b.everyBlock = ckpt, every }()
	switch b.pref.Reference {
	case RefAdapters:
		lora := b.Lora
		b.Lora = nil
		restore := b.ReuseParams()
		defer b.Scope(RefForward)() // the same modules, called again: named apart
		b.reuseStrip = RefForward + "."
		defer func() { b.Lora, b.reuseStrip = lora, ""; restore() }()
	default:
		if b.pref.klFirst() { // KTO's KL forward called the copy first (kto.go)
			defer b.ReuseParams()()
		}
		if b.pref.trainer() == TrainerOpenRLHF { // a second Actor, loaded without lora_rank: no adapters
			lora := b.Lora
			b.Lora = nil
			defer func() { b.Lora = lora }()
		}
		defer b.Scope(RefCopy)()
		b.refCopy = true
		defer func() { b.refCopy = false }()
	}
	params := len(b.P.Params)
	again := b.pref.Reference == RefAdapters || b.pref.klFirst() // modules whose parameters are registered
	y := m.lowerBody(b, in)
	if again && len(b.P.Params) != params {
		panic(LowerError{units.Errorf(b.Name(""), "internal error: the reference forward registered %d parameters the policy has not", len(b.P.Params)-params)})
	}
	lp, held := b.preferenceLogProbs(m, y, true)
	if again && len(b.P.Params) != params {
		panic(LowerError{units.Errorf(b.Name(""), "internal error: the reference head registered %d parameters the policy has not", len(b.P.Params)-params)})
	}
	return lp, held
}
