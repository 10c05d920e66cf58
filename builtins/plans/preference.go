package plans

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Preference is the Starlark value of dpo(...), kto(...) and grpo(...)
// (type "dpo", "kto" or "grpo", as core.Preference.KTO and GRPO say): TRL's
// DPOTrainer, KTOTrainer or GRPOTrainer as train(preference=...)'s
// objective. Reference is "" until train() resolves it against the plan's
// LoRA (core.RefOf, core.RefOfGRPO).
type Preference struct{ p core.Preference }

var (
	_ starlark.HasAttrs   = Preference{}
	_ starlark.Comparable = Preference{}
)

func (x Preference) Type() string {
	if x.p.GRPO() {
		return "grpo"
	}
	if x.p.KTO() {
		return "kto"
	}
	return "dpo"
}
func (x Preference) Freeze()               {}
func (x Preference) Truth() starlark.Bool  { return starlark.True }
func (x Preference) Hash() (uint32, error) { return starlark.String(x.String()).Hash() }

// CompareSameType compares the objectives' settings: a GRPO objective's
// reference is what train() resolved from beta and the plan's LoRA, not a
// setting, so a plan's preference equals the grpo(...) call that made it.
func (x Preference) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	a, b := x.p, y.(Preference).p
	if a.GRPO() {
		a.Reference = ""
	}
	if b.GRPO() {
		b.Reference = ""
	}
	switch op {
	case syntax.EQL:
		return a == b, nil
	case syntax.NEQ:
		return a != b, nil
	}
	return false, fmt.Errorf("%s %s %s not supported", x.Type(), op, y.Type())
}

func (x Preference) String() string {
	if x.p.GRPO() {
		return x.grpoString()
	}
	var args []string
	if x.p.KTO() {
		args = append(args, fmt.Sprintf("loss=%q", x.p.Loss))
	}
	if x.p.Reference != "" {
		args = append(args, fmt.Sprintf("reference=%q", x.p.Reference))
	}
	if x.p.Trainer != "" && x.p.Trainer != core.TrainerTRL {
		args = append(args, fmt.Sprintf("trainer=%q", x.p.Trainer))
	} else {
		args = append(args, fmt.Sprintf("trl=%q", x.p.TRL))
	}
	return x.Type() + "(" + strings.Join(args, ", ") + ")"
}

var (
	dpoAttrNames = []string{"reference", "trainer", "trl"}
	ktoAttrNames = []string{"loss", "reference", "trainer", "trl"}
)

func (x Preference) AttrNames() []string {
	if x.p.GRPO() {
		return grpoAttrNames
	}
	if x.p.KTO() {
		return ktoAttrNames
	}
	return dpoAttrNames
}

func (x Preference) Attr(name string) (starlark.Value, error) {
	if x.p.GRPO() {
		return x.grpoAttr(name)
	}
	orNone := func(s string) starlark.Value {
		if s == "" {
			return starlark.None
		}
		return starlark.String(s)
	}
	switch name {
	case "loss":
		if x.p.KTO() {
			return starlark.String(x.p.Loss), nil
		}
	case "reference":
		return orNone(x.p.Reference), nil
	case "trainer":
		if x.p.Trainer == "" {
			return starlark.String(core.TrainerTRL), nil
		}
		return starlark.String(x.p.Trainer), nil
	case "trl":
		return orNone(x.p.TRL), nil
	}
	return nil, nil
}

// PreferenceBuiltins are the preference objectives: dpo(), kto() and grpo().
func PreferenceBuiltins() []host.Builtin {
	return []host.Builtin{ktoBuiltin, grpoBuiltin, {
		Name: "dpo",
		Sig:  `dpo(reference=None, trl=None, trainer="trl")`,
		Doc: "TRL's DPOTrainer as the step's objective, for train(..., preference=dpo(...)) (docs/dpo.md): batch= counts pairs, each a chosen and a rejected completion " +
			"concatenated along the batch, so the model runs 2 x batch rows of seq tokens (the padded length of prompt and completion; tokens/s counts both rows); " +
			"the policy's forward and its per-token log-probabilities, then the reference model's forward under torch.no_grad() with gradient checkpointing disabled, " +
			"on top of everything the policy saved, then the sigmoid loss of the log-ratio margins, then the backward. " +
			"reference: \"model\" (a second copy of the model in the policy's dtype, never trained: TRL's default for a full fine-tune; its weights are r.params' too, and under autocast its casts are cached as the policy's are, since TRL leaves them requiring grad), " +
			"\"adapters\" (the policy with its LoRA adapters disabled: the default with lora=), \"precomputed\" (precompute_ref_log_probs=True: no reference forward in the step), " +
			"\"none\" (a loss without a reference: LLaMA-Factory's pref_loss orpo and simpo); None picks the trainer's default (adapters under lora=, else model). " +
			"trl: \"1.15\" (TRL 1.15 and later, 1.16.0 read: add_fused_lm_head scores the completion tokens in tiles of 4,096 tokens by 32,768 vocabulary entries and never makes the logits; " +
			"the hidden states of the scored positions copied, seven fp32 statistics a token, fp32 gradient buffers in the backward) or \"1.8\" (TRL 1.8 to 1.13, 1.8.0 read, the release Axolotl pins: " +
			"the model's whole logits, held until the loss, then log_softmax and gather one row at a time, each row's log_softmax saved; 16-bit logits only); None is \"1.15\". " +
			"trainer: \"trl\" (TRL's DPOTrainer, as trl= says), \"torchtune\" (torchtune's DPO recipes: the logits upcast to fp32, divided by the temperature and log_softmax'd whole, the log_softmax saved; " +
			"with reference=\"adapters\" the LoRA recipes, which keep the reference's fp32 logits until the next micro-batch's policy forward has scored its rows, with \"model\" full_dpo_distributed.py, " +
			"which scores the chosen and the rejected half apart and deletes the reference's logits) or \"llamafactory\" (LLaMA-Factory's stage dpo: the logits upcast to fp32 and log_softmax'd whole, " +
			"a contiguous copy of the shifted logits first, the policy's fp32 logits held until the loss) or \"openrlhf\" (OpenRLHF's train_dpo: the logits upcast to fp32 and scored whole by flash-attn's cross-entropy, " +
			"which saves them and a log-sum-exp a position and makes no log-probabilities over the vocabulary; its reference always a second model, reference=\"model\"); trl= is TRL's alone, and \"precomputed\" too. " +
			"memsh scores every position of a row (TRL masks the prompt and the padding): an upper bound. One GPU or data parallelism (ddp, zero 1, 2 or 3: " +
			"ZeRO-3 partitions the reference copy as the policy, gathered in its forward only, and gathers the policy's modules again for reference=\"adapters\"; under trl=\"1.15\" TRL gathers lm_head for its fused head, forward and backward) or FSDP2 " +
			"(fsdp=True: TRL's prepare_fsdp shards the reference copy with one fully_shard, so its forward gathers the whole copy and keeps the all-gather output beside it to its end; " +
			"reference=\"adapters\" gathers the policy's units again; a reference copy not with FSDP1, reshard_after_forward other than True or CPU offload; adapters not under FSDP1); " +
			"tensor, pipeline, context and expert parallelism, packing, compile and loss_chunks are refused.",
		Fn: dpoFn,
	}}
}

func dpoFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var ref, trlV starlark.Value = starlark.None, starlark.None
	trainer := core.TrainerTRL
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "reference?", &ref, "trl?", &trlV, "trainer?", &trainer); err != nil {
		return nil, err
	}
	return newPreference(b.Name(), core.Preference{Trainer: trainer}, ref, trlV, core.RefModel, core.RefAdapters, core.RefPrecomputed, core.RefNone)
}

// newPreference completes p (the trainer and, for KTO, the loss already
// set) with the call's reference= and trl=, checking the names where the
// call is; the rest is checked with the plan. refs are the references
// the builtin takes, for its error message.
func newPreference(fn string, p core.Preference, ref, trlV starlark.Value, refs ...string) (starlark.Value, error) {
	switch t := trlV.(type) {
	case starlark.NoneType:
		if p.Trainer == core.TrainerTRL {
			p.TRL = core.TRLFusedHead
		}
	case starlark.String:
		p.TRL = string(t)
	default:
		return nil, fmt.Errorf("%s: trl must be None, %q or %q (got %s)", fn, core.TRLFusedHead, core.TRLLogits, trlV.Type())
	}
	switch r := ref.(type) {
	case starlark.NoneType:
	case starlark.String:
		p.Reference = string(r)
	default:
		return nil, fmt.Errorf("%s: reference must be None, %s (got %s)", fn, quoteOr(refs), ref.Type())
	}
	check := p
	if check.Reference == "" {
		check.Reference = core.RefModel
	}
	if err := check.Validate(); err != nil {
		return nil, err
	}
	return Preference{p}, nil
}

// quoteOr lists names quoted, the last after "or": "a", "b" or "c".
func quoteOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func setPreference(_ string, v *starlark.Value, _ *trainArgs, p *core.Plan) error {
	switch x := (*v).(type) {
	case starlark.NoneType:
	case Preference:
		pr := x.p
		switch {
		case pr.GRPO():
			pr.Reference = core.RefOfGRPO(pr.GRPOConfig.Beta, p.LoRA)
		case pr.Reference == "":
			pr.Reference = pr.RefOf(p.LoRA)
		}
		p.Preference = &pr
	default:
		return fmt.Errorf("preference must be None, dpo(...), kto(...) or grpo(...) (got %s)", x.Type())
	}
	return nil
}
