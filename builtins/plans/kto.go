package plans

import (
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"go.starlark.net/starlark"
)

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
	if loss == "" { // "" is DPO's (core.Preference.KTO): refused as KTO's unknown loss
		return nil, (&core.Preference{Reference: core.RefModel}).ValidateKTO()
	}
	return newPreference(b.Name(), core.Preference{Trainer: trainer, Loss: loss}, ref, trlV, core.RefModel, core.RefAdapters, core.RefPrecomputed)
}
