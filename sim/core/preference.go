package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Preference is a preference-tuning objective in place of the language
// model's cross-entropy (train(preference=dpo(...))): TRL's DPOTrainer,
// whose batch is pairs of a chosen and a rejected completion of one
// prompt, concatenated along the batch ([chosen, rejected]: DataCollator
// ForPreference), so Plan.Batch pairs run through the model as twice as
// many rows of Plan.Seq tokens (the padded length of prompt and
// completion). The policy's per-token log-probabilities of the completion
// are summed per row; the reference model's come from a second forward
// under torch.no_grad() after the policy's (dpo_trainer.py _compute_loss),
// or from the batch when they were precomputed; the sigmoid loss of the
// log-ratio margins is a handful of [batch] tensors.
type Preference struct {
	// Reference: where the reference log-probabilities come from
	// (RefModel, RefAdapters, RefPrecomputed, RefNone).
	Reference string
	// Trainer: whose DPO step runs (TrainerTRL, TrainerTorchtune,
	// TrainerLlamaFactory); "" is TRL's.
	Trainer string
	// TRL: the DPOTrainer release whose log-probability path the step
	// runs (TRLFusedHead, TRLLogits); "" under another trainer.
	TRL string
	// Loss: "" for DPO's pairs, one of TRL's KTOTrainer's unpaired
	// losses (LossKTO, LossAPOZeroUnpaired: kto.go), whose batch is rows,
	// or LossGRPO (TRL's GRPOTrainer: grpo.go), whose batch is completions.
	Loss string
	// GRPOConfig: GRPOTrainer's settings (Loss LossGRPO only).
	GRPOConfig GRPOConfig
}

// The unpaired losses of TRL's KTOTrainer (KTOConfig.loss_type,
// trl/trainer/kto_config.py, 1.8.0 and 1.16.0 read): each row is one
// completion, labelled desirable or undesirable.
const (
	// LossKTO: the KTO loss, which estimates the KL term from a second
	// forward over mismatched prompt and completion pairs (calculate_KL:
	// KTOTrainer.__init__, loss_type not in ["apo_zero_unpaired"]).
	LossKTO = "kto"
	// LossAPOZeroUnpaired: APO-zero's unpaired loss, no KL forward.
	LossAPOZeroUnpaired = "apo_zero_unpaired"
)

// KTO reports whether pr is TRL's KTOTrainer (an unpaired loss) rather
// than a DPO step.
func (pr *Preference) KTO() bool { return pr != nil && pr.Loss != "" && pr.Loss != LossGRPO }

// KL reports whether pr's step runs KTO's KL forwards over the batch's
// mismatched pairs (KL_input_ids): the policy's under no_grad before its
// forward, the reference's before its own.
func (pr *Preference) KL() bool { return pr != nil && pr.Loss == LossKTO }

// klFirst reports whether pr's KL forwards run before the forwards they
// pair with (TRL's KTOTrainer; LLaMA-Factory's runs them after).
func (pr *Preference) klFirst() bool { return pr.KL() && pr.trainer() == TrainerTRL }

// what names pr's objective in errors: preference=dpo() or kto().
func (pr *Preference) what() string {
	if pr.GRPO() {
		return "preference=grpo()"
	}
	if pr.KTO() {
		return "preference=kto()"
	}
	return "preference=dpo()"
}

// path is the key pr's own errors name: dpo or kto.
func (pr *Preference) path() string {
	if pr.GRPO() {
		return "grpo"
	}
	if pr.KTO() {
		return "kto"
	}
	return "dpo"
}

// The trainers whose DPO steps memsh replays.
const (
	// TrainerTRL: TRL's DPOTrainer, its log-probabilities as Preference.TRL
	// says.
	TrainerTRL = "trl"
	// TrainerTorchtune: torchtune's DPO recipes (recipes/lora_dpo_*.py,
	// full_dpo_distributed.py): the whole logits upcast to fp32, divided
	// by the temperature, log_softmax'd at once; the reference's logits
	// held to the next micro-batch (dpo_logits.go).
	TrainerTorchtune = "torchtune"
	// TrainerLlamaFactory: LLaMA-Factory's CustomDPOTrainer (src/
	// llamafactory/train/dpo/trainer.py): the whole logits upcast to fp32
	// and log_softmax'd at once, the policy's held until the loss
	// (dpo_logits.go).
	TrainerLlamaFactory = "llamafactory"
	// TrainerOpenRLHF: OpenRLHF's DPOTrainer (openrlhf/trainer/
	// dpo_trainer.py at v0.11.0): flash-attn's cross-entropy over the fp32
	// logits (dpo_openrlhf.go), its reference always a second model.
	TrainerOpenRLHF = "openrlhf"
)

// trainer is pr's trainer, TRL's when none is named.
func (pr *Preference) trainer() string {
	if pr.Trainer == "" {
		return TrainerTRL
	}
	return pr.Trainer
}

// FusedHead reports whether the step runs TRL's fused LM head
// (trl_fused_head.go): the model's body returns its last hidden states.
func (pr *Preference) FusedHead() bool {
	return pr != nil && pr.trainer() == TrainerTRL && pr.TRL == TRLFusedHead
}

// The reference models of DPOTrainer (trl/trainer/dpo_trainer.py).
const (
	// RefModel: a second copy of the model, loaded from the same
	// checkpoint in the policy's dtype (create_model_from_path with dtype
	// = model.dtype), frozen by never reaching the optimizer: TRL's
	// default for a full fine-tune.
	RefModel = "model"
	// RefAdapters: the policy itself with its LoRA adapters disabled
	// (use_adapter(model, None)): no second copy; the default under LoRA.
	RefAdapters = "adapters"
	// RefPrecomputed: precompute_ref_log_probs=True, the reference
	// log-probabilities computed before training and read from the batch:
	// no reference forward in the step.
	RefPrecomputed = "precomputed"
	// RefNone: a loss without a reference (LLaMA-Factory's pref_loss orpo
	// and simpo): no reference forward, nothing from the batch.
	RefNone = "none"
)

// The DPOTrainer releases whose log-probabilities memsh replays.
const (
	// TRLFusedHead: TRL 1.15 and later (1.16.0 read): the model's forward
	// patched by add_fused_lm_head computes the completion tokens'
	// log-probabilities in tiles of the vocabulary (ChunkedLogProbFunction,
	// trl/kernels/chunked_logprob.py), never the logits (trl_fused_head.go).
	TRLFusedHead = "1.15"
	// TRLLogits: TRL 1.8 to 1.13 (1.8.0 read, the release Axolotl pins):
	// the model's logits, then selective_log_softmax's log_softmax and
	// gather one row at a time (trl_logits.go).
	TRLLogits = "1.8"
	// TRLLogitsDiv: GRPOTrainer of TRL 1.10 to 1.13 (1.10.0 and 1.13.0
	// read): the logits path of TRLLogits with the temperature's division
	// out of place (logits = logits / self.temperature, a new tensor),
	// where 1.8 and 1.9 divide in place (grpo_logits.go). GRPO only: the
	// other trainers' releases are TRLLogits'.
	TRLLogitsDiv = "1.10"
)

// Logits reports whether the step's TRL release computes the logits
// (TRLLogits, TRLLogitsDiv) rather than TRL's fused LM head.
func (pr *Preference) Logits() bool {
	return pr != nil && pr.trainer() == TrainerTRL && (pr.TRL == TRLLogits || pr.TRL == TRLLogitsDiv)
}

// PreferenceOp is the op kind of the objective's own arithmetic on the
// summed log-probabilities (the log-ratios, their margin, the sigmoid loss).
const PreferenceOp = "dpo_loss"

// Rows is how many sequences of the batch one pair makes: the chosen and
// the rejected completion. KTO's and GRPO's batches count rows: 1.
func (pr *Preference) Rows() int64 {
	if pr == nil || pr.KTO() || pr.GRPO() {
		return 1
	}
	return 2
}

// RefOf is the reference a DPO plan runs when reference= was not given:
// the policy with its adapters disabled under LoRA, else a copy of the
// model (DPOTrainer.__init__: ref_model None and a PEFT model, or a copy);
// OpenRLHF's train_dpo loads a copy whatever it trains.
func (pr *Preference) RefOf(lora *LoRA) string {
	if pr.trainer() == TrainerOpenRLHF {
		return RefModel
	}
	return RefOf(lora)
}

// RefOf is TRL's default reference (Preference.RefOf).
func RefOf(lora *LoRA) string {
	if lora != nil {
		return RefAdapters
	}
	return RefModel
}

// Validate checks the objective's own names.
func (pr *Preference) Validate() error {
	if pr.GRPO() {
		return pr.validateGRPO()
	}
	if pr.KTO() {
		return pr.ValidateKTO()
	}
	tr := pr.trainer()
	switch {
	case pr.Reference != RefModel && pr.Reference != RefAdapters && pr.Reference != RefPrecomputed && pr.Reference != RefNone:
		return &units.Error{Path: "dpo", Msg: fmt.Sprintf("unknown reference %q", pr.Reference),
			Hint: fmt.Sprintf("reference is %q (a frozen copy of the model), %q (the policy with its LoRA adapters disabled), %q (precompute_ref_log_probs) or %q (a loss without one: ORPO, SimPO)", RefModel, RefAdapters, RefPrecomputed, RefNone)}
	case tr != TrainerTRL && tr != TrainerTorchtune && tr != TrainerLlamaFactory && tr != TrainerOpenRLHF:
		return &units.Error{Path: "dpo", Msg: fmt.Sprintf("unknown trainer %q", pr.Trainer),
			Hint: fmt.Sprintf("trainer is %q (TRL's DPOTrainer), %q (torchtune's DPO recipes), %q (LLaMA-Factory's stage dpo) or %q (OpenRLHF's train_dpo)", TrainerTRL, TrainerTorchtune, TrainerLlamaFactory, TrainerOpenRLHF)}
	case tr == TrainerOpenRLHF && pr.Reference != RefModel:
		return &units.Error{Path: "dpo", Msg: fmt.Sprintf(`reference=%q: OpenRLHF's train_dpo always loads its reference as a second model`, pr.Reference),
			Hint: `reference="model", or leave it out`}
	case tr != TrainerTRL && pr.TRL != "":
		return &units.Error{Path: "dpo", Msg: fmt.Sprintf("trl=%q picks a TRL release, and trainer=%q runs its own log-probabilities", pr.TRL, tr),
			Hint: "drop trl= (or trainer=)"}
	case tr != TrainerTRL && pr.Reference == RefPrecomputed:
		return &units.Error{Path: "dpo", Msg: fmt.Sprintf(`reference="precomputed" is TRL's precompute_ref_log_probs; trainer=%q computes the reference's log-probabilities in every step`, tr),
			Hint: `reference="model" or "adapters"`}
	case tr == TrainerTRL && pr.TRL != TRLFusedHead && pr.TRL != TRLLogits:
		return &units.Error{Path: "dpo", Msg: fmt.Sprintf("unknown trl %q", pr.TRL),
			Hint: fmt.Sprintf("trl is %q (TRL 1.15 and later: the fused LM head) or %q (TRL 1.8 to 1.13: logits and selective_log_softmax); 1.14's fused log-softmax kernel over the logits is not modelled", TRLFusedHead, TRLLogits)}
	}
	return nil
}

// trainerClass names the TRL trainer class a refusal speaks of.
func (pr *Preference) trainerClass() string {
	if pr.GRPO() {
		return "GRPOTrainer"
	}
	return "DPOTrainer"
}

// headHint is the hint of a fused head refused over a quantized or
// adapted lm_head: GRPO has no other release to offer.
func (pr *Preference) headHint() string {
	if pr.GRPO() {
		return `leave lm_head out of lora(targets=...) and quantization, or trl="1.10" (TRL 1.10 to 1.13: the logits)`
	}
	return `leave lm_head out of lora(targets=...), or trl="1.8"`
}

// validatePreference checks a plan with a preference objective.
func (p *Plan) validatePreference() error {
	pr := p.Preference
	if pr == nil {
		return nil
	}
	if err := pr.Validate(); err != nil {
		return err
	}
	if pr.GRPO() {
		if err := p.validatePlanGRPO(); err != nil {
			return err
		}
	}
	what := pr.what()
	m := p.Model
	par := p.Parallel.Norm()
	switch {
	case pr.Reference == RefAdapters && p.LoRA == nil:
		return &units.Error{Path: pr.path(), Msg: `reference="adapters" disables the policy's LoRA adapters, and the plan has none`,
			Hint: `pass lora=lora(...), or reference="model" for a frozen copy`}
	case m == nil || m.Vocab <= 0 || (m.Loss != "" && m.Loss != "cross_entropy"):
		return &units.Error{Path: "train", Msg: what + " scores the completion tokens' log-probabilities: the model has no language-model head",
			Hint: "a causal language model with a vocabulary"}
	case p.Phase == Eval:
		return &units.Error{Path: "train", Msg: what + " is a training objective", Hint: "drop preference= for an eval plan"}
	case p.FusedLoss != "" || p.LossChunks > 1:
		return &units.Error{Path: "train", Msg: what + " computes its own log-probabilities: loss_chunks does not apply",
			Hint: "drop loss_chunks (trl=\"1.15\" is TRL's own fused LM head)"}
	case p.KeepLogits:
		return &units.Error{Path: "train", Msg: what + " with keep_logits is not modelled", Hint: "drop keep_logits"}
	case par.TP > 1 || par.PP > 1 || par.CP > 1 || par.EP > 1:
		return &units.Error{Path: "train", Msg: what + " runs on data parallelism alone (" + pr.trainerClass() + " under accelerate): tensor, pipeline, context and expert parallelism are not modelled",
			Hint: "use parallel(dp=...) with ddp, zero 1, 2 or 3, or fsdp (FSDP2)"}
	case par.FSDP && par.FSDPVersion == 1 && pr.Reference == RefAdapters && !pr.GRPO():
		return &units.Error{Path: "train", Msg: what + ` with reference="adapters" under FSDP1 is not modelled: the reference forward unshards the policy's FlatParameters a second time, which memsh replays for FSDP2 and ZeRO-3 only`,
			Hint: "use FSDP2 (fsdp_version 2), parallel(zero=3), ddp or zero 1/2"}
	case par.FSDP && pr.Reference == RefModel && par.FSDPVersion == 1:
		return &units.Error{Path: "train", Msg: what + " with a reference copy under FSDP1 is not modelled: TRL's prepare_fsdp wraps the copy with FullyShardedDataParallel, whose root keeps its unsharded flat parameter after a forward without a backward (_post_forward_reshard), from one step to the next",
			Hint: "use FSDP2 (fsdp_version 2: TRL shards the copy with one fully_shard), ddp or parallel(zero=...)"}
	case par.FSDP && pr.Reference == RefModel && !pr.GRPO() && (par.NoReshard || par.ReshardTo > 0 || (p.Offload != nil && p.Offload.Params != "")):
		return &units.Error{Path: "train", Msg: what + " with a reference copy under FSDP2 is modelled with reshard_after_forward=True and no CPU offload: TRL's prepare_fsdp passes the trainer's reshard_after_forward and offload_policy to the copy's fully_shard, whose unit has no backward to reshard or reload it in",
			Hint: "drop reshard_after_forward and offload, or use reference=\"precomputed\""}
	case p.Precision.Megatron:
		return &units.Error{Path: "train", Msg: what + " is TRL's DPOTrainer, not Megatron-LM", Hint: `use precision="bf16" or "bf16-mixed"`}
	case p.Members > 1 || p.Rollout > 1 || p.TokensPerBatch > 0:
		return &units.Error{Path: "train", Msg: what + " does not combine with members, rollout or packing (tokens_per_batch)",
			Hint: "DPOTrainer pads each pair to the batch's longest; drop tokens_per_batch"}
	case p.Model.Data != nil || p.Images.Count > 0 || p.Videos.Count > 0:
		return &units.Error{Path: "train", Msg: what + " is modelled for text models", Hint: "drop images= and videos="}
	case p.Compile.Blocks || p.Compile.Loss:
		return &units.Error{Path: "train", Msg: what + " with compile is not modelled", Hint: "drop compile"}
	case pr.Logits() && (p.Precision.Compute == units.FP32 || (m.ForwardUpcast && m.LogitsFP32)):
		return &units.Error{Path: pr.path(), Msg: fmt.Sprintf("trl=%q: ", pr.TRL) + `selective_log_softmax over fp32 logits (a gather and a logsumexp per row, the logits kept for the backward) is not modelled`,
			Hint: `use precision="bf16", "bf16-mixed" or "fp16", or trl="1.15"`}
	case pr.FusedHead() && (p.QuantLMHead || (p.LoRA != nil && p.LoRA.Adapts(RoleLMHead, m.Head()))):
		return &units.Error{Path: "train", Msg: what + ` with trl="1.15" reads lm_head.weight directly (add_fused_lm_head): it cannot be quantized or carry a LoRA adapter`,
			Hint: pr.headHint()}
	case par.FSDP && pr.KTO():
		return &units.Error{Path: "train", Msg: what + " under FSDP is not modelled: its KL forwards gather the policy's (and the reference copy's) units a second time in one forward, which memsh's gather units (one gather per unit and forward) do not replay",
			Hint: "use ddp or parallel(zero=1 or 2)"}
	case par.Zero >= 3 && pr.KL():
		return &units.Error{Path: "train", Msg: what + ` with loss="kto" under ZeRO-3 is not modelled: its KL forward runs the policy's partitioned weights a second time, gathered again, which memsh's gather units (one gather per module and forward) do not replay`,
			Hint: `use ddp or parallel(zero=1 or 2), or loss="apo_zero_unpaired" (no KL forward)`}
	case pr.klFirst() && p.Batch < 2:
		return &units.Error{Path: "train", Msg: what + ` with loss="kto" needs batch >= 2: KTOTrainer refuses per_device_train_batch_size <= 1 ("the KL term will be equivalent to the implied reward")`,
			Hint: `batch=2 or more, or loss="apo_zero_unpaired"`}
	}
	return nil
}
