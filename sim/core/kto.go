package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// A KTO step as TRL's KTOTrainer runs it (Preference.Loss; trl/trainer/
// kto_trainer.py _compute_loss and _compute_kl_logps, 1.8.0 read for
// trl="1.8", 1.15.0 and 1.16.0 for "1.15"). The batch is unpaired rows
// (DataCollatorForUnpairedPreference), each one completion labelled
// desirable or undesirable, padded to the batch's longest; with
// loss_type "kto" (calculate_KL) it also carries KL_input_ids, each
// prompt with the completion of the row before (get_kl_completion_ids),
// padded apart. In order:
//
//   - _compute_kl_logps(model): the policy's forward over KL_input_ids
//     under torch.no_grad() (its adapters on, gradient checkpointing left
//     as it is: under no_grad nothing is saved either way), its
//     log-probabilities summed per row; its logits (1.8) go when the
//     function returns;
//   - the policy's forward over input_ids and its log-probabilities, as
//     DPOTrainer's of the same release (trl_logits.go, trl_fused_head.go);
//     under 1.15 the model is patched with outputs=("log_probs",
//     "entropy", "mean_logits"), all three held by outputs;
//   - 1.8 only: chosen_logits = outputs.logits.index_select(0,
//     chosen_idx) and rejected_logits likewise: every row's logits
//     copied (the two copies' rows add up to the batch's), held by
//     _compute_loss's locals for the logits/chosen and logits/rejected
//     metrics until it returns; no gradient reaches them;
//   - the reference, under no_grad with gradient checkpointing disabled:
//     its KL forward (_compute_kl_logps(ref_model)) and then its forward
//     over input_ids, whose outputs are held until _compute_loss returns
//     (ref_outputs), as DPO's (dpo.go); or ref_logps and ref_KL_logps from
//     the batch (precompute_ref_log_probs);
//   - 1.8 only: entropy_from_logits(shift_logits.detach()), which
//     reshapes the shifted logits to [rows x (seq-1), V] (a copy: the
//     slice is not contiguous across rows) and log_softmaxes them 128
//     rows at a time, -(exp(logps) * logps).sum(-1) a chunk;
//   - the loss of the [rows] log-ratios and the KL estimate, then the
//     backward of the policy's forward alone.
//
// The KL forwards run the same modules as the forwards after them: the
// parameters are registered by the first call (its ops named KL.*) and
// the second reads them (Builder.reuse), and autocast's cached weight
// casts are made once (Builder.castCache; measured on the CPU: a cast made
// under no_grad is handed to the forward with grad, whose weights still
// get their gradients).

// KTOOp is the op kind of KTO's loss over the summed log-probabilities.
const KTOOp = "kto_loss"

// The scope of KTO's KL forwards (_compute_kl_logps): KL.layers.0...,
// KL.ref_model.layers.0..., KL.reference.layers.0...
const KLForward = "KL"

// entropyChunk is entropy_from_logits' chunk_size (trl/trainer/utils.py,
// 1.8.0): the rows of the flattened logits log_softmaxed at once.
const entropyChunk = 128

// ValidateKTO checks a KTO objective's own names (Validate calls it when
// pr.KTO(); kto(loss="") calls it itself, since "" is DPO's loss).
func (pr *Preference) ValidateKTO() error {
	switch {
	case pr.Loss != LossKTO && pr.Loss != LossAPOZeroUnpaired:
		return &units.Error{Path: "kto", Msg: fmt.Sprintf("unknown loss %q", pr.Loss),
			Hint: fmt.Sprintf("loss is %q (KTO, with its KL forwards) or %q (APO-zero, unpaired: no KL forward): KTOConfig.loss_type", LossKTO, LossAPOZeroUnpaired)}
	case pr.Reference != RefModel && pr.Reference != RefAdapters && pr.Reference != RefPrecomputed:
		return &units.Error{Path: "kto", Msg: fmt.Sprintf("unknown reference %q", pr.Reference),
			Hint: fmt.Sprintf("reference is %q (a frozen copy of the model), %q (the policy with its LoRA adapters disabled) or %q (precompute_ref_log_probs): KTOTrainer always scores a reference", RefModel, RefAdapters, RefPrecomputed)}
	case pr.trainer() == TrainerLlamaFactory && pr.TRL != "":
		return &units.Error{Path: "kto", Msg: fmt.Sprintf(`trl=%q picks a TRL release, and trainer="llamafactory" runs its own log-probabilities`, pr.TRL),
			Hint: "drop trl= (or trainer=)"}
	case pr.trainer() == TrainerLlamaFactory && pr.Loss != LossKTO:
		return &units.Error{Path: "kto", Msg: fmt.Sprintf(`loss=%q: LLaMA-Factory's stage kto always runs the KL forwards (CustomKTOTrainer sets calculate_KL)`, pr.Loss),
			Hint: `loss="kto"`}
	case pr.trainer() == TrainerLlamaFactory && pr.Reference == RefPrecomputed:
		return &units.Error{Path: "kto", Msg: `reference="precomputed" is TRL's precompute_ref_log_probs; LLaMA-Factory's stage kto scores the reference in every step`,
			Hint: `reference="model" or "adapters"`}
	case pr.trainer() == TrainerLlamaFactory:
	case pr.trainer() != TrainerTRL:
		return &units.Error{Path: "kto", Msg: fmt.Sprintf("trainer %q: memsh replays TRL's KTOTrainer and LLaMA-Factory's stage kto", pr.Trainer),
			Hint: fmt.Sprintf("trainer is %q or %q", TrainerTRL, TrainerLlamaFactory)}
	case pr.TRL != TRLFusedHead && pr.TRL != TRLLogits:
		return &units.Error{Path: "kto", Msg: fmt.Sprintf("unknown trl %q", pr.TRL),
			Hint: fmt.Sprintf("trl is %q (TRL 1.15 and later: the fused LM head) or %q (TRL 1.8.0, the release Axolotl pins: the logits); 1.13 and 1.14, which moved the logits' copies and fused the log-softmax, are not modelled", TRLFusedHead, TRLLogits)}
	}
	return nil
}

// ktoLoss lowers KTOTrainer._compute_loss on in, the batch's input_ids.
func (b *Builder) ktoLoss(m *Model, in Value) Value {
	pr := b.pref
	kl, klIn := NoValue, NoValue
	if pr.KL() {
		klIn = b.input("KL_input_ids", b.Shape(in), b.Dtype(in))
		b.Val(klIn).Why = "KL_input_ids: each prompt with the completion of the row before (get_kl_completion_ids), padded as the batch"
		b.P.BatchExtra = append(b.P.BatchExtra, klIn)
	}
	if pr.trainer() == TrainerLlamaFactory {
		return b.ktoLossLlamaFactory(m, in, klIn)
	}
	if pr.KL() {
		kl = b.klLogProbs(m, klIn, false)
	}
	restore, every := noScope, b.everyBlock
	if pr.KL() { // the modules the KL forward registered, called again
		restore = b.ReuseParams()
		b.everyBlock = true // a copied block would register its parameters again
	}
	params := len(b.P.Params)
	x := m.lowerBody(b, in)
	policy, held := b.preferenceLogProbs(m, x, false)
	if pr.KL() && len(b.P.Params) != params {
		panic(LowerError{units.Errorf(b.Name(""), "internal error: the policy's forward registered %d parameters its KL forward has not", len(b.P.Params)-params)})
	}
	restore()
	b.everyBlock = every
	if pr.TRL == TRLLogits {
		held = append(held, b.ktoLogitsCopy(x))
	}
	ins := []Value{policy, kl}
	switch pr.Reference {
	case RefPrecomputed:
		ref := b.input("ref_logps", []int64{b.Batch}, units.FP32)
		b.Val(ref).Why = "ref_logps of the batch (precompute_ref_log_probs)"
		ins = append(ins, ref)
		if pr.KL() {
			refKL := b.input("ref_KL_logps", []int64{b.Batch}, units.FP32)
			b.Val(refKL).Why = "ref_KL_logps of the batch (precompute_ref_log_probs)"
			ins = append(ins, refKL)
		}
	default:
		if pr.KL() {
			ins = append(ins, b.klLogProbs(m, klIn, true))
		}
		ref, refHeld := b.referenceLogProbs(m, in)
		ins = append(ins, ref)
		held = append(held, refHeld...)
	}
	if pr.TRL == TRLLogits {
		b.ktoEntropy(x)
	}
	return b.ktoLossOp(ins, held)
}

// ktoLossOp lowers KTO's loss over the rows' summed log-probabilities
// (ins) and what the trainer holds until it returns (held).
func (b *Builder) ktoLossOp(ins, held []Value) Value {
	defer b.Scope("loss")()
	var live []Value
	for _, v := range append(ins, held...) {
		if v != NoValue {
			live = append(live, v)
		}
	}
	i := b.AddOp(KTOOp, "kto_loss", live)
	// The held outputs get no gradient from the loss; the policy's summed
	// log-probabilities get one of [rows] elements (a few bytes), which
	// memsh does not allocate.
	b.Op(i).NoGradB = true
	return b.Out(i, "loss", nil, units.FP32, "the KTO loss: 1 - sigmoid(beta x (the desirable rows' log-ratios - KL)) and 1 - sigmoid(beta x (KL - the undesirable rows')), weighted, averaged over the rows")
}

// klLogProbs lowers _compute_kl_logps on klIn under torch.no_grad(): the
// policy's forward (ref false: its adapters on; the first call of its
// modules, whose parameters it registers as the policy's) or the
// reference's (a copy, ref_model.*, or the policy with its adapters
// disabled), and the rows' summed log-probabilities; what the forward
// returned goes when the function returns.
func (b *Builder) klLogProbs(m *Model, klIn Value, ref bool) Value {
	done := b.NoGrad()
	defer done()
	ckpt, every, strip, lora, first := b.Ckpt, b.everyBlock, b.reuseStrip, b.Lora, b.policyFirst
	b.Ckpt = Checkpoint{Mode: "none"} // under no_grad checkpointing saves nothing either way
	b.everyBlock, b.klForward = true, true
	defer func() {
		b.Ckpt, b.everyBlock, b.reuseStrip, b.Lora, b.policyFirst = ckpt, every, strip, lora, first
		b.klForward = false
	}()
	defer b.ReuseParams()()
	defer b.Scope(KLForward)()
	b.reuseStrip = KLForward + "."
	switch {
	case !ref:
		b.policyFirst = true // registered as the policy's forward would
	case b.pref.Reference == RefAdapters:
		b.Lora = nil
		defer b.Scope(RefForward)()
		b.reuseStrip = KLForward + "." + RefForward + "."
	default:
		defer b.Scope(RefCopy)()
		b.refCopy = true
		defer func() { b.refCopy = false }()
	}
	params := len(b.P.Params)
	y := m.lowerBody(b, klIn)
	lp, held := b.preferenceLogProbs(m, y, true)
	if ref && len(b.P.Params) != params && (b.pref.Reference == RefAdapters) {
		panic(LowerError{units.Errorf(b.Name(""), "internal error: the reference's KL forward registered %d parameters the policy has not", len(b.P.Params)-params)})
	}
	if b.pref.TRL == TRLLogits {
		b.KeepAlive("KL_logits", held...) // KL_logits, a local until the function returns
	}
	return lp
}

// ktoLogitsCopy lowers TRL 1.8.0's chosen_logits and rejected_logits:
// outputs.logits.index_select(0, chosen_idx) and (0, rejected_idx), every
// row's logits copied once between them (one tensor here: the rows'
// split is the data's), held until _compute_loss returns. Nothing of the
// loss reads them: no gradient reaches them, and IndexSelectBackward0
// saves only the index (a few int64). LLaMA-Factory's
// target_logits[kto_tags] and [~kto_tags] copy the fp32 logits alike
// (IndexBackward0 saving the bool tags as given: a few bytes).
func (b *Builder) ktoLogitsCopy(x Value) Value {
	kind, why := "index_select", "outputs.logits.index_select(0, chosen_idx) and (0, rejected_idx): every row's logits copied for the logits/chosen and logits/rejected metrics, held until _compute_loss returns"
	if b.pref.trainer() == TrainerLlamaFactory {
		kind, why = "index", "target_logits[kto_tags] and [~kto_tags]: every row's fp32 logits copied (concatenated_forward), the policy's held for the logits/chosen and logits/rejected metrics until get_batch_loss_metrics returns"
	}
	i := b.AddOp(kind, "chosen_rejected_logits", []Value{x})
	b.Op(i).NoGradB = true
	y := b.Out(i, "chosen_rejected_logits", b.Shape(x), b.Dtype(x), why)
	b.Val(y).Grad = false
	b.Op(i).Bytes = 2 * float64(b.Val(y).Bytes)
	return y
}

// ktoEntropy lowers TRL 1.8.0's entropy_from_logits(shift_logits.detach())
// (trl/trainer/utils.py) on the policy's logits x ([rows, seq, V]): no
// graph (detached); the flattened shifted logits, a copy when there is
// more than one row (entropyFromLogits); the entropies' [rows x (seq-1)]
// are multiplied by the mask and summed at once (left out).
func (b *Builder) ktoEntropy(x Value) {
	done := b.NoGrad()
	defer done()
	defer b.Scope("entropy")()
	s := b.Shape(x)
	rows, seq, vocab := Rows(s)/s[len(s)-2], s[len(s)-2], s[len(s)-1]
	y := b.entropyFromLogits(x, rows, seq-1, vocab, rows > 1)
	b.KeepAlive("entropy_sum", y)
}

// entropyFromLogits lowers TRL's entropy_from_logits (trl/trainer/utils.py,
// the same from 1.8.0 to 1.13.0) over rows x positions of logits x, under
// the caller's no_grad and scope: logits.reshape(-1, V), a copy when
// copied (a slice not contiguous across rows), then per chunk of
// entropyChunk rows log_softmax, exp, their product (three [chunk, V]
// tensors at once, in the logits' dtype) and its negated sum. It returns
// the per-position entropies [rows x positions].
func (b *Builder) entropyFromLogits(x Value, rows, positions, vocab int64, copied bool) Value {
	n, ld := rows*positions, b.Dtype(x)
	flat := x
	if copied { // logits[:, :-1, :].reshape(-1, V): not a view
		i := b.AddOp("copy", "flat_logits", []Value{x})
		flat = b.Out(i, "flat_logits", []int64{n, vocab}, ld, "shift_logits.reshape(-1, V): the shifted logits copied (the slice is not contiguous across rows)")
		b.Op(i).Bytes = 2 * float64(b.Val(flat).Bytes)
	}
	ie := b.AddOp("entropy", "entropy_from_logits", []Value{flat})
	chunk := ld.Bytes(min(n, entropyChunk) * vocab)
	b.Op(ie).Work = &WorkTensors{F: []int64{chunk, chunk, chunk}} // log_softmax, exp, their product
	b.Op(ie).WorkF = 3 * chunk
	// log_softmax reads a chunk three times and writes it; exp, the
	// product and the negation read five and write three: twelve passes.
	b.Op(ie).Bytes = 12 * float64(ld.Bytes(n*vocab))
	b.Op(ie).Flops = 5 * float64(n*vocab)
	return b.Out(ie, "per_token_entropy", []int64{n}, ld, "each position's entropy (entropy_from_logits)")
}

// ktoLossLlamaFactory lowers LLaMA-Factory's stage kto
// (src/llamafactory/train/kto/trainer.py at ff6d4d12e,
// CustomKTOTrainer.get_batch_loss_metrics): concatenated_forward runs the
// policy's forward (forward(): the logits upcast to fp32, get_batch_logps
// as its DPO's, dpo_logits.go), then under no_grad its KL forward over
// kl_input_ids, then copies the fp32 logits of the desirable and the
// undesirable rows (target_logits[kto_tags], [~kto_tags]), held to the
// loss; the fp32 logits go when it returns. compute_reference_log_probs
// runs the same under no_grad on the reference (a copy, or the policy
// with disable_adapter()), its copies dropped at once. calculate_KL is
// always on; the loss of the [rows] log-ratios, then the backward.
func (b *Builder) ktoLossLlamaFactory(m *Model, in, klIn Value) Value {
	x := m.lowerBody(b, in)
	policy, held := b.preferenceLogProbs(m, x, false) // held: the fp32 logits
	kl := b.klLogProbs(m, klIn, false)
	copies := b.ktoLogitsCopy(held[0])
	ref, refHeld := b.referenceLogProbs(m, in)
	refKL := b.klLogProbs(m, klIn, true)
	func() {
		if b.pref.Reference == RefAdapters {
			defer b.Scope(RefForward)()
		} else {
			defer b.Scope(RefCopy)()
		}
		done := b.NoGrad()
		defer done()
		b.ktoLogitsCopy(refHeld[0]) // discarded by compute_reference_log_probs
	}()
	return b.ktoLossOp([]Value{policy, kl, ref, refKL}, []Value{copies})
}
