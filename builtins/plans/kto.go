package plans

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"go.starlark.net/starlark"
)

// KTO is the Starlark value of kto(...) (type "kto"): TRL's KTOTrainer as
// train(preference=...)'s objective. Reference is "" until train()
// resolves it against the plan's LoRA (core.RefOf).
type KTO struct{ p core.Preference }

var _ starlark.HasAttrs = KTO{}

func (x KTO) Type() string          { return "kto" }
func (x KTO) Freeze()               {}
func (x KTO) Truth() starlark.Bool  { return starlark.True }
func (x KTO) Hash() (uint32, error) { return starlark.String(x.String()).Hash() }

func (x KTO) String() string {
	how := fmt.Sprintf("trl=%q", x.p.TRL)
	if x.p.Trainer != "" && x.p.Trainer != core.TrainerTRL {
		how = fmt.Sprintf("trainer=%q", x.p.Trainer)
	}
	if x.p.Reference == "" {
		return fmt.Sprintf("kto(loss=%q, %s)", x.p.Loss, how)
	}
	return fmt.Sprintf("kto(loss=%q, reference=%q, %s)", x.p.Loss, x.p.Reference, how)
}

var ktoAttrNames = []string{"loss", "reference", "trainer", "trl"}

func (x KTO) AttrNames() []string { return ktoAttrNames }

func (x KTO) Attr(name string) (starlark.Value, error) {
	switch name {
	case "loss":
		return starlark.String(x.p.Loss), nil
	case "reference":
		if x.p.Reference == "" {
			return starlark.None, nil
		}
		return starlark.String(x.p.Reference), nil
	case "trainer":
		return starlark.String(x.p.Trainer), nil
	case "trl":
		if x.p.TRL == "" {
			return starlark.None, nil
		}
		return starlark.String(x.p.TRL), nil
	}
	return nil, nil
}

// ktoBuiltin is kto(): TRL's KTOTrainer.
var ktoBuiltin = host.Builtin{
	Name: "kto",
	Sig:  `kto(loss="kto", reference=None, trl=None, trainer="trl")`,
	Doc: "TRL's KTOTrainer as the step's objective, for train(..., preference=kto(...)) (docs/kto.md): batch= counts rows, each one completion labelled desirable or undesirable " +
		"(unpaired: DataCollatorForUnpairedPreference), seq their padded length. " +
		"loss: \"kto\" (KTOConfig's default: a KL forward of the policy under torch.no_grad() over the batch's mismatched prompt and completion pairs, KL_input_ids, before its forward, " +
		"and the reference's before its own; needs batch >= 2, as KTOTrainer does) or \"apo_zero_unpaired\" (no KL forward). " +
		"Then the policy's forward and its per-token log-probabilities, the reference's forward under no_grad with gradient checkpointing disabled on top of everything the policy saved, the loss, the backward. " +
		"reference: \"model\" (a second copy of the model in the policy's dtype: TRL's default for a full fine-tune), \"adapters\" (the policy with its LoRA adapters disabled: the default with lora=) " +
		"or \"precomputed\" (precompute_ref_log_probs=True: ref_logps and ref_KL_logps come with the batch); None picks the default. " +
		"trl: \"1.15\" (TRL 1.15 and later, 1.15.0 and 1.16.0 read: add_fused_lm_head with the log-probabilities, entropy and mean logits, never the logits) or " +
		"\"1.8\" (TRL 1.8.0, the release Axolotl pins: the whole logits and selective_log_softmax as DPO's, a copy of every row's logits by index_select for the logits metrics, held to the loss, " +
		"and entropy_from_logits' flattened copy of the shifted logits after the reference forward; 16-bit logits only); None is \"1.15\". " +
		"trainer: \"trl\" (TRL's KTOTrainer, as trl= says) or \"llamafactory\" (LLaMA-Factory's stage kto, src/llamafactory/train/kto/trainer.py at ff6d4d12e: the policy's forward with its logits upcast to fp32 and log_softmax'd whole as its DPO's, " +
		"then its KL forward under no_grad, then the desirable and undesirable rows' fp32 logits copied and held to the loss; the reference's forward, KL forward and copies after; loss \"kto\" only, no trl=, no \"precomputed\"). " +
		"memsh pads KL_input_ids as input_ids and scores every position of a row: an upper bound. One GPU or data parallelism (ddp, zero 1 or 2; zero 3 only without the KL forward, " +
		"loss=\"apo_zero_unpaired\", its reference as DPO's); FSDP, tensor, pipeline, context and expert parallelism, packing, compile and loss_chunks are refused.",
	Fn: ktoFn,
}

func ktoFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var ref, trlV starlark.Value = starlark.None, starlark.None
	loss, trainer := core.LossKTO, core.TrainerTRL
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "loss?", &loss, "reference?", &ref, "trl?", &trlV, "trainer?", &trainer); err != nil {
		return nil, err
	}
	p := core.Preference{Trainer: trainer, Loss: loss}
	switch t := trlV.(type) {
	case starlark.NoneType:
		if trainer == core.TrainerTRL {
			p.TRL = core.TRLFusedHead
		}
	case starlark.String:
		p.TRL = string(t)
	default:
		return nil, fmt.Errorf("kto: trl must be None, %q or %q (got %s)", core.TRLFusedHead, core.TRLLogits, trlV.Type())
	}
	switch r := ref.(type) {
	case starlark.NoneType:
	case starlark.String:
		p.Reference = string(r)
	default:
		return nil, fmt.Errorf("kto: reference must be None, %q, %q or %q (got %s)", core.RefModel, core.RefAdapters, core.RefPrecomputed, ref.Type())
	}
	check := p
	if check.Reference == "" {
		check.Reference = core.RefModel
	}
	if err := check.Validate(); err != nil {
		return nil, err
	}
	return KTO{p}, nil
}
