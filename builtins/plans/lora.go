package plans

import (
	"fmt"
	"slices"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// LoRA is the Starlark value of a low-rank adapter configuration (type
// "lora").
type LoRA struct{ l *core.LoRA }

var _ starlark.HasAttrs = LoRA{}

// SimLoRA is the wrapped configuration.
func (x LoRA) SimLoRA() *core.LoRA { return x.l }

func (x LoRA) Type() string          { return "lora" }
func (x LoRA) Freeze()               {}
func (x LoRA) Truth() starlark.Bool  { return starlark.True }
func (x LoRA) Hash() (uint32, error) { return starlark.String(x.String()).Hash() }

func (x LoRA) String() string { return x.l.String() }

// CompareSameType: two adapter configurations are equal when every
// setting is.
func (x LoRA) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	a, b := x.l, y.(LoRA).l
	eq := a.Rank == b.Rank && a.Alpha == b.Alpha && slices.Equal(a.Targets, b.Targets) && a.Pattern == b.Pattern &&
		slices.Equal(a.TargetParameters, b.TargetParameters) && a.Dropout == b.Dropout && a.BaseDType == b.BaseDType
	return compareEqual(op, eq, "LoRA configurations")
}

var loraAttrNames = []string{"alpha", "autocast_adapter_dtype", "dropout", "rank", "target_parameters", "target_pattern", "targets"}

func (x LoRA) AttrNames() []string { return loraAttrNames }

func (x LoRA) Attr(name string) (starlark.Value, error) {
	switch name {
	case "rank":
		return starlark.MakeInt64(x.l.Rank), nil
	case "alpha":
		return starlark.Float(x.l.Alpha), nil
	case "dropout":
		return starlark.Float(x.l.Dropout), nil
	case "autocast_adapter_dtype":
		return starlark.Bool(!x.l.BaseDType), nil
	case "targets":
		if x.l.Pattern != "" { // the pattern stands for the targets: lora(targets=None, target_pattern=...) again
			return starlark.None, nil
		}
		return stringTuple(x.l.Targets), nil
	case "target_parameters":
		return stringTuple(x.l.TargetParameters), nil
	case "target_pattern":
		if x.l.Pattern == "" {
			return starlark.None, nil
		}
		return starlark.String(x.l.Pattern), nil
	}
	return nil, nil
}

func stringTuple(ss []string) starlark.Tuple {
	out := make(starlark.Tuple, len(ss))
	for i, t := range ss {
		out[i] = starlark.String(t)
	}
	return out
}

func LoraBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "lora",
		Sig:  "lora(rank=8, alpha=16, targets=[\"q\", \"v\"], dropout=0.0, autocast_adapter_dtype=True, target_parameters=[], target_pattern=None)",
		Doc: "Low-rank adapters for train(lora=...): the base weights are frozen (no gradients, no optimizer " +
			"state) and each targeted linear layer gets trainable A (rank x in) and B (out x rank), as PEFT's " +
			"LoraLayer. targets are module roles: q, k, v, o, qkv, gate, up, down, lm_head, router, linear (plain " +
			"linear() layers), expert_gate, expert_up, expert_down (an MoE's experts only), or \"all-linear\"; or module " +
			"names as PEFT's target_modules list takes them: a linear is adapted when its path is the name or ends in " +
			"\".\" and the name, so [\"query\", \"value\"] (PEFT's default for BERT and RoBERTa; hf_config names modules as " +
			"transformers does) reaches every attention.self.query and attention.self.value, [\"c_attn\"] GPT-2's fused " +
			"projection, \"output.dense\" both of a BERT layer's output denses. Names of which none matches anything are " +
			"refused, as PEFT refuses them (a list of which some match is applied, as PEFT applies it), as are roles no linear of the model has when nothing else matches " +
			"(a plan that would train nothing; a linear the model names like a role, \"up\", is reached by target_pattern=\".*\\\\.up\"), and so is one naming a single layer (\"layer.3.attention.self.query\"): memsh adapts the same " +
			"modules in every layer. target_pattern is PEFT's target_modules given as one string, in place of targets (whose attribute is then None): a " +
			"regular expression a linear's whole module path must match (re.fullmatch), so " +
			"\"model.language_model.layers.[0-9]+.(self_attn|mlp).(q|v|up)_proj\" reaches those projections of a vision-language " +
			"model's text layers and none of its vision tower's; it may pick some layers (\"model.layers.(0|1).self_attn.q_proj\"). memsh reads " +
			"RE2's syntax (no lookarounds or backreferences) and refuses a pattern that matches no linear, as PEFT refuses it. An adapter on a pooler's dense (BERT's pooler, RoBERTa's classifier.dense) is not " +
			"modelled: a target reaching one is refused. " +
			"On PEFT's Mamba model types (mamba, mamba2, falcon_mamba, falcon_h1, nemotron_h) a target reaching a Mamba mixer's out_proj " +
			"or conv1d, all-linear included, is refused, as PEFT refuses it (the Mamba kernels read those weights themselves). " +
			"As PEFT's target_modules match module names, gate, up and down reach the experts' projections too " +
			"when the experts are nn.Linear modules (moe(impl=\"loop\"), transformers 4.x), and all-linear reaches " +
			"every nn.Linear but lm_head, an nn.Linear router included. On transformers 5's MoE families whose 4.x " +
			"checkpoints transformers converts (Mixtral, Qwen3-MoE, OLMoE, DeepSeek-V2/V3, GLM-4.5, dots1, ERNIE 4.5, " +
			"Hunyuan, LongCat-Flash, Qwen3-Next, MiniMax-M2, ...) PEFT (0.20 on) converts the targets: all-linear " +
			"and the 4.x names (gate, gate_proj, up_proj, down_proj; Mixtral's gate, w1, w3, w2) reach the 3-D " +
			"experts and the router weight as PEFT's ParamWrapper (adapters [experts x rank, in] and [out, experts x " +
			"rank], gate_up_proj at twice the rank; the merged weight W + BA a new tensor each forward, which the " +
			"expert GEMMs save), and no nn.Linear named like them (dense and shared-expert MLPs) gets one (docs/peft.md, " +
			"\"MoE\"). target_parameters is PEFT's: parameters wrapped the same way by name (a path ending in \".\" and " +
			"the name: [\"mlp.experts.gate_up_proj\", \"mlp.experts.down_proj\"] reaches gpt-oss's, Qwen2-MoE's or PhiMoE's " +
			"3-D experts, which no conversion does; [\"o_proj.weight\"] an nn.Linear's weight, unless targets adapts " +
			"that linear too, which PEFT refuses), at the given rank; dropout must be 0 then, as PEFT's ParamWrapper " +
			"requires. Other fused or grouped experts and parameter routers get no adapters. dropout applies to the adapter input. autocast_adapter_dtype is PEFT's " +
			"get_peft_model keyword (True by default since peft 0.12): over a bf16 or fp16 model (precision=\"bf16\" " +
			"or \"fp16\", quantized or not) the adapters, their gradients and their optimizer state are fp32, and " +
			"each adapted linear casts its input to fp32 (a copy lora_A saves), runs both adapter GEMMs in fp32 " +
			"(no TF32: PyTorch's default), adds the update to the 16-bit base output in fp32 and casts the sum " +
			"back. False keeps the adapters in the model's dtype, as torchtune and LitGPT build them and as " +
			"autocast_adapter_dtype=False or casting the model after get_peft_model leaves them. Under autocast " +
			"the adapters take the params dtype: fp32 with bf16-mixed; bf16 params under autocast are TRL's QLoRA, " +
			"which casts its adapters back to bf16 (peft_module_casting_to_bf16). With ZeRO, FSDP, Megatron's distributed optimizer " +
			"or a precision with an fp32 master copy (\"megatron\", \"fp16-master\") memsh keeps the adapters in the plan's dtypes (docs/peft.md).",
		Fn: loraFn,
	}}
}

func loraFn(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var rank, alpha, dropout, targets, autocastAdapter, targetParams starlark.Value
	var patternArg host.NoneOr[starlark.String]
	if err := AliasedKeyword(b.Name(), kwargs, loraAlias); err != nil {
		return nil, err
	}
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "rank?", &rank, "alpha?", &alpha, "targets?", &targets, "dropout?", &dropout,
		"autocast_adapter_dtype?", &autocastAdapter, "target_parameters?", &targetParams, "target_pattern?", &patternArg); err != nil {
		return nil, err
	}
	pattern := patternArg.V
	l := &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q", "v"}}
	if autocastAdapter != nil {
		on, ok := autocastAdapter.(starlark.Bool)
		if !ok {
			return nil, &units.Error{Msg: fmt.Sprintf("autocast_adapter_dtype must be True or False (got %s)", autocastAdapter.Type()),
				Hint: "PEFT's get_peft_model keyword: True (its default) keeps the adapters of a bf16 or fp16 model in fp32, False in the model's dtype"}
		}
		l.BaseDType = !bool(on)
	}
	var err error
	if l.Rank, err = models.OptInt(rank, "rank", 8); err != nil {
		return nil, err
	}
	if alpha != nil && alpha != starlark.None {
		if l.Alpha, err = host.AsFloat(alpha, "alpha"); err != nil {
			return nil, err
		}
	}
	if l.Dropout, err = models.OptProb(dropout, "dropout"); err != nil {
		return nil, err
	}
	if targets != nil && targets != starlark.None {
		if l.Targets, err = stringList(targets, "targets"); err != nil {
			return nil, err
		}
	}
	if pattern != "" {
		if targets != nil && targets != starlark.None {
			return nil, &units.Error{Msg: "lora: target_pattern stands for targets, as PEFT's target_modules is one string or a list",
				Hint: "give targets=[...] (names or roles) or target_pattern=\"...\" (a regular expression), not both"}
		}
		l.Targets, l.Pattern = nil, string(pattern)
	}
	if targetParams != nil && targetParams != starlark.None {
		if l.TargetParameters, err = stringList(targetParams, "target_parameters"); err != nil {
			return nil, err
		}
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return LoRA{l}, nil
}
