package core

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Frozen parameters without LoRA: train(..., freeze=[...]) sets
// requires_grad=False on the parameters it names, as a training script
// does with `for p in model.embed.parameters(): p.requires_grad = False`.
// A frozen parameter has no gradient and no optimizer state; a linear
// whose weight is frozen does not keep its input for backward (autograd
// saves an operand only when the other one needs a gradient), so freezing
// also saves activations.
//
// Each name in the list matches a parameter when it is
//   - "all": every parameter of the base model (adapters added by lora()
//     or adapter modules stay trainable);
//   - a role: embed, norm, q, k, v, o, qkv, gate, up, down, lm_head,
//     router, expert_up, ... (the module roles LoRA targets use);
//   - a module path prefix, cut at dots: "embed", "layers.0",
//     "layers.3.attn", "lm_head" ("layers.1" does not match "layers.10").

// paramTrainable decides requires_grad for a parameter being registered:
// trainable is what the model and LoRA decided; freeze= turns it off;
// modules a recipe trains explicitly (adapter v2's norms) turn it on.
func (ft *Finetune) paramTrainable(name string, role Role, trainable, eval bool) bool {
	if ft == nil || eval {
		return trainable
	}
	if ft.Unfreeze > 0 {
		return true
	}
	return trainable && !ft.frozen(name, role) && ft.unfrozen(name)
}

// frozen reports whether the parameter named name with this role is frozen.
func (ft *Finetune) frozen(name string, role Role) bool {
	if ft == nil {
		return false
	}
	for _, f := range ft.freeze {
		if f == "all" || Role(f) == role || PathPrefix(f, name) {
			return true
		}
	}
	return false
}

// PathPrefix reports whether prefix names name or one of its ancestors,
// from the root ("model.layers.0") or from any module down the path
// ("layers.0", as the model's body would call it).
func PathPrefix(prefix, name string) bool {
	for start := 0; start <= len(name)-len(prefix); start++ {
		if start > 0 && name[start-1] != '.' {
			continue
		}
		rest := name[start:]
		if strings.HasPrefix(rest, prefix) && (len(rest) == len(prefix) || rest[len(prefix)] == '.') {
			return true
		}
	}
	return false
}

// checkFreeze refuses a freeze name that matches no parameter of the
// whole model, neither as a role nor as a module path (a pipeline stage
// may hold none of a module's): freeze=["layerz"] froze nothing, and the
// step was a full fine-tune's, as checkpoint(modules=...) refuses a name
// no layer has.
func (b *Builder) checkFreeze() error {
	if b.Ft == nil || len(b.Ft.freeze) == 0 || b.P.Stage != nil {
		return nil
	}
	for _, f := range b.Ft.freeze {
		if f == "all" {
			continue
		}
		hit := false
		for _, p := range b.P.Params {
			if hit = Role(f) == p.Role || PathPrefix(f, p.Name); hit {
				break
			}
		}
		if !hit {
			return &units.Error{Path: "train", Msg: fmt.Sprintf("freeze names %q, which is neither a role nor a module path of any parameter of the model", f),
				Hint: "the model's top modules are " + b.topModules() + `; "all" freezes the whole base model`}
		}
	}
	return nil
}

// topModules lists the first components of the parameters' names, in
// order of first appearance, at most eight.
func (b *Builder) topModules() string {
	seen := map[string]bool{}
	var out []string
	for _, p := range b.P.Params {
		top, _, _ := strings.Cut(p.Name, ".")
		if !seen[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	if len(out) > 8 {
		out = append(out[:8], "...")
	}
	return strings.Join(out, ", ")
}
