package core

import "github.com/memsh/memsh/sim/units"

// A validation pass before the step (Plan.Validation): PyTorch Lightning
// runs validation batches in eval mode under torch.no_grad() before the
// first training step (the sanity check, num_sanity_val_steps=2 by
// default) and between epochs; the caching allocator keeps what those
// batches cached, so the training step starts from that cache. The pass
// is the plan's forward lowered with Phase "eval" (eval chunk counts,
// nothing saved for backward), replayed through the step's allocator
// after the parameters and optimizer state exist and before the step's
// batch: its own batch, activations and autocast weight copies are freed
// when it ends, and its allocations count in the step's peaks, largest
// allocation and OOM (phase "validation"). Its FLOPs are not part of the
// step's time.

// validateValidation checks that a validation pass fits the plan.
func (p *Plan) validateValidation() error {
	if !p.Validation {
		return nil
	}
	switch {
	case p.Phase == Eval:
		return &units.Error{Path: "train", Msg: `validation=True adds a validation pass before a training step, and phase is "eval"`,
			Hint: `drop validation=True to replay the validation pass alone, or use phase="train"`}
	case p.Parallel.Active():
		return &units.Error{Path: "train", Msg: "validation=True is modelled on one GPU (no parallel= layout)",
			Hint: "replay the validation pass alone with phase=\"eval\" on the same layout"}
	case p.Offload != nil:
		return &units.Error{Path: "train", Msg: "validation=True is not modelled with offload=",
			Hint: "replay the validation pass alone with phase=\"eval\""}
	}
	return nil
}

// lowerValidation lowers the validation pass of a plan with Validation set.
func (p *Plan) LowerValidation() (*Program, *Plan, error) {
	ep := *p
	ep.Phase, ep.Validation = Eval, false
	prog, err := ep.LowerProgram()
	if err != nil {
		return nil, nil, err
	}
	if len(prog.Tables) > 0 {
		return nil, nil, &units.Error{Path: "train", Msg: "validation=True is not modelled for models with table() layers",
			Hint: "replay the validation pass alone with phase=\"eval\""}
	}
	return prog, &ep, nil
}
