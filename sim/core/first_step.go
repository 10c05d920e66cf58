package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// The first training step (Plan.FirstStep). PyTorch's optimizers create
// their state lazily: Adam's exp_avg and exp_avg_sq (torch/optim/adam.py
// _init_group), SGD's momentum_buffer, ... appear inside the first
// optimizer.step(), so the first step's forward and backward run without
// them and the step allocates them. Everything else is as in the steady
// state the replay models by default (step 2 onwards). Master weights,
// which mixed-precision wrappers make when they wrap the model, exist from
// the start either way.

// validateFirstStep checks where the first step is modelled.
func (p *Plan) validateFirstStep() error {
	if !p.FirstStep {
		return nil
	}
	if p.Phase == Eval {
		return &units.Error{Path: "train", Msg: `first_step=True replays the optimizer's first step, and phase is "eval" (no optimizer step)`,
			Hint: `drop first_step, or use phase="train"`}
	}
	what := ""
	switch {
	case p.Parallel.Active():
		what = "a parallel= layout"
	case p.Offload != nil:
		what = "offload="
	case p.Optimizer.Paged():
		what = "a paged optimizer"
	case p.Optimizer.InBackward:
		what = "an optimizer stepped in the backward"
	}
	if what != "" {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("first_step=True is modelled on one GPU with the optimizer state on it, not with %s", what),
			Hint: "drop first_step to replay the steady state"}
	}
	return nil
}

// checkFirstStep refuses the first step for table models, whose sparse
// optimizers keep their own state (replay/table_replay.go).
func (p *Plan) CheckFirstStep(prog *Program) error {
	if p.FirstStep && len(prog.Tables) > 0 {
		return &units.Error{Path: "train", Msg: "first_step=True is not modelled for models with table() layers",
			Hint: "drop first_step to replay the steady state"}
	}
	return nil
}
