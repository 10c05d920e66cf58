package core

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// A LoRA target is a role or a module name. A role (linearRoles) reaches
// every linear of that role whatever the model calls it: "q" is Llama's
// q_proj, BERT's query, GPT-2's fused c_attn. Any other target is a
// module name, matched as PEFT matches a list of target_modules
// (check_target_module_exists, peft/tuners/tuners_utils.py at 0.21.2): a
// linear is adapted when its module path is the target or ends in "."
// and the target, so "query" reaches every
// bert.encoder.layer.N.attention.self.query, "attention.self.query" the
// same ones and "output.dense" both attention.output.dense and the
// layer's output.dense. The names are the model's own (hf_config's are
// transformers').

func isLoRARole(t string) bool {
	if t == "all-linear" {
		return true
	}
	for _, r := range linearRoles {
		if r == t {
			return true
		}
	}
	return false
}

// compileTargetPattern compiles a LoRA.Pattern as PEFT matches it,
// re.fullmatch over the whole module path. Go's regular expressions are
// RE2's: a pattern Python's re reads with a lookaround or a backreference
// is refused, not read otherwise.
func compileTargetPattern(p string) (*regexp.Regexp, *units.Error) {
	re, err := regexp.Compile(`^(?:` + p + `)$`)
	if err != nil {
		return nil, &units.Error{Path: "lora", Msg: fmt.Sprintf("target_pattern %q is not a regular expression memsh reads: %v", p, err),
			Hint: "PEFT matches it with Python's re.fullmatch; memsh reads RE2's syntax, without lookarounds or backreferences: name the modules with targets=[...] instead"}
	}
	return re, nil
}

// patternAdapts reports whether the plan's target_pattern matches the
// module path of the linear the builder is in, noting the hit.
func (b *Builder) patternAdapts(module string) bool {
	if b.loraRe == nil {
		re, err := compileTargetPattern(b.Lora.Pattern)
		if err != nil {
			panic(LowerError{err}) // Validate compiled it
		}
		b.loraRe = re
	}
	return b.loraRe.MatchString(module)
}

// checkNameTarget refuses a module-name target that PEFT would read
// otherwise or that memsh cannot apply to every block alike: memsh lowers
// one block of a repeat and copies it, so a target naming one layer
// ("layer.3.attention.self.query") would reach them all.
func checkNameTarget(t string) error {
	if t == "" || strings.ContainsAny(t, "*[]()|\\^$?+ ") {
		return fmt.Errorf("lora: target %q must be a role (%s, all-linear) or a module name such as \"query\" or \"attention.self.query\" (no patterns)", t, strings.Join(linearRoles, ", "))
	}
	for _, part := range strings.Split(t, ".") {
		if part == "" || strings.Trim(part, "0123456789") == "" {
			return fmt.Errorf("lora: target %q names one layer or an empty module name: memsh adapts the same modules in every layer (name the module, e.g. %q)", t, lastSegment(t))
		}
	}
	return nil
}

// nameTarget is the module-name target module matches, "" for none. A
// target PEFT converts to a parameter target on this model (ex:
// lora_experts.go) matches no module.
func (l *LoRA) nameTarget(module string, ex peftExpertNames) string {
	for _, t := range l.Targets {
		if !isLoRARole(t) && ex.converted(t) == "" && (module == t || strings.HasSuffix(module, "."+t)) {
			return t
		}
	}
	return ""
}

// Adapts reports whether a linear of role at module path module gets an
// adapter: its role or its module name is targeted.
func (l *LoRA) Adapts(role Role, module string) bool {
	if l.Pattern != "" {
		re, err := compileTargetPattern(l.Pattern)
		return err == nil && re.MatchString(module)
	}
	return l.targets(role, true) || l.nameTarget(module, peftExpertNames{}) != ""
}

// adapts reports whether the linear of role the builder is in (its
// module path, b.Name("")) gets an adapter, noting the module-name
// target it matched (unmatchedLoRATargets). all-linear leaves out a
// linear whose leaf name PEFT converts on this model (lora_experts.go).
func (b *Builder) adapts(role Role) bool {
	if b.Lora == nil {
		return false
	}
	module, ex := b.Name(""), b.peftExperts()
	if b.Lora.Pattern != "" {
		return b.patternAdapts(module)
	}
	if b.Lora.targets(role, !ex.excludes(module)) {
		return true
	}
	t := b.Lora.nameTarget(module, ex)
	if t == "" {
		return false
	}
	if b.loraHits == nil {
		b.loraHits = map[string]bool{}
	}
	b.loraHits[t] = true
	return true
}

// hasMambaLinear reports whether the model has a module named out_proj
// or conv1d (a Mamba mixer's), which PEFT's check meets only where one
// exists (a Nemotron-H of attention and MoE layers alone has none).
func (b *Builder) hasMambaLinear() bool {
	for _, p := range b.P.Params {
		if mod, ok := strings.CutSuffix(p.Name, ".weight"); ok {
			if leaf := lastSegment(mod); leaf == "out_proj" || leaf == "conv1d" {
				return true
			}
		}
	}
	return false
}

// peftMambaTarget is the target PEFT refuses on a Mamba-based model
// (Model.PEFTMamba): all-linear, which reaches the mixers' out_proj, or
// a module name ending in out_proj or conv1d; "" for none.
func (l *LoRA) peftMambaTarget() string {
	for _, t := range l.Targets {
		if leaf := lastSegment(t); t == "all-linear" || leaf == "out_proj" || leaf == "conv1d" {
			return t
		}
	}
	return ""
}

// LoRAAdapts reports whether LoRA targets the linear of role a layer
// lowers with its own matmul (BERT's pooler.dense), in the linear's
// scope: by its role, all-linear, or its module name.
func (b *Builder) LoRAAdapts(role Role) bool { return b.adapts(role) }

// LoRAOutput adds PEFT's lora.Linear branch to y, the output of a linear
// of role a layer lowers with its own matmul, when LoRA targets it (in
// the linear's scope; x is the input the module is called with); else y.
func (b *Builder) LoRAOutput(role Role, x, y Value, in, out int64) Value {
	if !b.adapts(role) {
		return y
	}
	return b.loraAdapter(x, y, in, out)
}

// unmatchedLoRATargets refuses a target_parameters entry that wrapped
// no parameter (PEFT would wrap any parameter it names; memsh wraps an
// nn.Linear's weight, the experts' and the routers' only), and
// module-name targets of which none
// matched a linear of the whole model when no adapter was made at all,
// as PEFT's get_peft_model does ("Target modules ... not found in the
// base model"; a list of which some names match is applied without a
// word: BaseTuner.inject_adapter at 0.21.2).
func (b *Builder) unmatchedLoRATargets() error {
	if b.Lora == nil {
		return nil
	}
	if t := b.Lora.peftMambaTarget(); t != "" && b.Ft != nil && b.Ft.peftMamba && b.hasMambaLinear() {
		return &units.Error{Path: "lora", Msg: fmt.Sprintf("target %q reaches the Mamba mixers' out_proj or conv1d, on which PEFT refuses LoRA for Mamba-based models (\"Module 'out_proj' is incompatible with Mamba-based models\": the Mamba kernels read those weights themselves)", t),
			Hint: "name the modules to adapt without out_proj and conv1d: targets=[\"in_proj\", \"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\", \"up_proj\", \"down_proj\"] (the names a model has; Mamba-1's x_proj and dt_proj too)"}
	}
	for _, t := range b.Lora.TargetParameters {
		if !b.loraHits[paramHit(t)] {
			return &units.Error{Path: "lora", Msg: fmt.Sprintf("target_parameters %q names no parameter memsh wraps as PEFT's ParamWrapper (an MoE's 3-D experts, gate_up_proj and down_proj, its router's weight, or an nn.Linear's weight)", t),
				Hint: "name a 3-D expert weight as transformers names it (\"mlp.experts.gate_up_proj\"), or adapt a linear module with targets="}
		}
	}
	if b.loraAdapted {
		return nil
	}
	if b.Lora.Pattern != "" {
		return &units.Error{Path: "lora", Msg: fmt.Sprintf("target_pattern %q matches no linear module's whole path (PEFT: target modules not found in the base model)", b.Lora.Pattern),
			Hint: "match the paths as the model names its modules (transformers' named_modules(): \"model.layers.0.self_attn.q_proj\"), the whole path: PEFT's re.fullmatch"}
	}
	for _, t := range b.Lora.Targets {
		if !isLoRARole(t) && !b.loraHits[t] {
			return &units.Error{Path: "lora", Msg: fmt.Sprintf("target %q names no linear module of the model (PEFT: target modules not found in the base model)", t),
				Hint: fmt.Sprintf("name a linear module as the model names it (transformers' named_modules(): \"query\", \"c_attn\", \"q_proj\"), or a role: %s, all-linear", strings.Join(linearRoles, ", "))}
		}
	}
	if len(b.Lora.Targets) > 0 && len(b.Lora.TargetParameters) == 0 {
		// Every target is a role and no linear has one: PEFT raises when
		// no target module is found, and a plan without an adapter
		// would report a LoRA step that trains nothing.
		return &units.Error{Path: "lora", Msg: fmt.Sprintf("targets %s reach no linear module: no linear of the model has those roles (PEFT: target modules not found in the base model)", quotedList(b.Lora.Targets)),
			Hint: fmt.Sprintf("%s are roles (q_proj, up_proj... whatever the model calls them); a module the model names like one (a linear called \"up\") is reached by target_pattern=\".*\\.up\"", strings.Join(linearRoles, ", "))}
	}
	return nil
}

// quotedList is targets as a user wrote them: "q", "v".
func quotedList(ts []string) string {
	q := make([]string, len(ts))
	for i, t := range ts {
		q[i] = fmt.Sprintf("%q", t)
	}
	return strings.Join(q, ", ")
}
