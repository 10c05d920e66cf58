package core

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Trainable parameters by name (train(trainable=[...])): every parameter
// is frozen but those whose full name (as the model's named_parameters()
// writes it, "model.language_model.layers.0.mlp.up_proj.weight") one of
// the patterns matches from its start, as Python's re.match does: what
// Axolotl's unfrozen_parameters does (utils/freeze.py freeze_layers_except
// at 067b021c8, which sets requires_grad False on every parameter, then
// True on those a LayerNamePattern matches). A frozen parameter has no
// gradient and no optimizer state, and a linear whose weight is frozen
// keeps no input for backward (freeze.go).

// compileTrainable compiles the plan's trainable patterns, each anchored at
// the name's start.
func compileTrainable(patterns []string) ([]*regexp.Regexp, error) {
	res := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		if strings.TrimSpace(p) == "" {
			return nil, &units.Error{Path: "train", Msg: "trainable patterns must not be empty",
				Hint: `trainable=["model.language_model", "lm_head"] keeps the parameters whose names start as these regular expressions do`}
		}
		re, err := regexp.Compile(`^(?:` + p + `)`)
		if err != nil {
			return nil, &units.Error{Path: "train", Msg: fmt.Sprintf("trainable pattern %q is not a regular expression memsh reads: %v", p, err),
				Hint: "memsh reads RE2's syntax (no lookarounds or backreferences), matched from the name's start as Python's re.match does"}
		}
		res = append(res, re)
	}
	return res, nil
}

// validateTrainable checks train(trainable=).
func (p *Plan) validateTrainable() error {
	if len(p.Trainable) == 0 {
		return nil
	}
	if p.LoRA != nil {
		return &units.Error{Path: "train", Msg: "trainable= freezes the parameters it does not name, and lora= freezes the whole base already",
			Hint: "drop trainable=, or drop lora= for a partial full fine-tune"}
	}
	_, err := compileTrainable(p.Trainable)
	return err
}

// unfrozen reports whether a trainable pattern matches the parameter's
// name (true when there are none).
func (ft *Finetune) unfrozen(name string) bool {
	if len(ft.trainable) == 0 {
		return true
	}
	for _, re := range ft.trainable {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// checkTrainable refuses trainable patterns that leave nothing to train
// in a whole model (a pipeline stage may hold only frozen layers).
func (b *Builder) checkTrainable() error {
	if b.Ft == nil || len(b.Ft.trainable) == 0 || b.Eval || b.P.Stage != nil {
		return nil
	}
	for i := range b.P.Params {
		if b.Trainable(int32(i)) { // a tied parameter trains with the one it shares
			return nil
		}
	}
	var names []string
	for i, p := range b.P.Params {
		if i == 3 {
			names = append(names, "...")
			break
		}
		names = append(names, p.Name)
	}
	return &units.Error{Path: "train", Msg: fmt.Sprintf("trainable=%q leaves nothing to train (a tied lm_head trains with the embedding it shares, whose name is the one that counts, as named_parameters() lists it)", b.Ft.trainablePatterns),
		Hint: "the patterns match the parameters' full names from their start, such as " + strings.Join(names, ", ")}
}
