package sim

import "fmt"

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
	if p.Phase == "eval" {
		return &Error{Path: "train", Msg: `first_step=True replays the optimizer's first step, and phase is "eval" (no optimizer step)`,
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
		return &Error{Path: "train", Msg: fmt.Sprintf("first_step=True is modelled on one GPU with the optimizer state on it, not with %s", what),
			Hint: "drop first_step to replay the steady state"}
	}
	return nil
}

// firstStepStates allocates the optimizer state the first
// optimizer.step() creates, before its update.
func (r *replay) firstStepStates() {
	if !r.plan.FirstStep {
		return
	}
	dt := r.plan.Precision.States
	for pi := range r.p.params {
		p := &r.p.params[pi]
		if p.tiedTo >= 0 || !p.trainable || r.gradless[pi] {
			continue
		}
		for _, s := range r.plan.Optimizer.states(p.shape, p.numel, dt) {
			r.allocState(p, s, "optimizer state "+s.name+", created by the first optimizer.step()")
		}
	}
}

// checkFirstStep refuses the first step for table models, whose sparse
// optimizers keep their own state (table_replay.go).
func (p *Plan) checkFirstStep(prog *program) error {
	if p.FirstStep && len(prog.tables) > 0 {
		return &Error{Path: "train", Msg: "first_step=True is not modelled for models with table() layers",
			Hint: "drop first_step to replay the steady state"}
	}
	return nil
}
