package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Rollout: anemoi's autoregressive training (Plan.Rollout steps;
// train/forecaster/ensforecaster.py@training-0.5.1, rollout_step). Each
// step predicts the next date from the current input, adds its loss, and
// builds the next input:
//
//	for step in range(rollout):
//	    y_pred = model(x)
//	    loss += checkpoint(gather_and_compute_loss, y_pred, y)
//	    x = advance_input(x, y_pred, batch, step)   # x.roll(-1, dims=1), then
//	                                                # the prediction's prognostic
//	                                                # variables and the next
//	                                                # date's forcings written in
//
// All steps' graphs live until the backward, so what one step keeps for
// backward is kept once per step; the steps share the model's parameters
// and autocast's weight copies (one autocast region). The loop calls
// advance_input after the last step too: that input is a local until the
// loop ends and no loss depends on it.

// validateRollout checks Plan.Rollout.
func (p *Plan) validateRollout() error {
	switch {
	case p.Rollout < 0:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("rollout must be at least 1 (got %d)", p.Rollout)}
	case p.Rollout > 1 && p.Model.Data == nil:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("rollout=%d replays anemoi's rollout loop, which builds each step's input from the data batch, and model %q has none", p.Rollout, p.Model.Name),
			Hint: "encoder_processor_decoder(..., data_variables=N)"}
	}
	return nil
}

// lowerRollout lowers the rollout loop of a model built from a data batch
// (data_batch.go) for its first input x and returns the summed loss.
func (b *Builder) lowerRollout(m *Model, x Value, steps int64) Value {
	batch := b.P.Input
	b.Val(x).Cached = false // dropped when the loop builds the next input
	loss := NoValue
	var first lowering // step 0's
	for s := int64(0); s < steps; s++ {
		name := ""
		if steps > 1 {
			name = fmt.Sprintf("rollout%d", s)
		}
		done := b.Scope(name)
		low := b.startLowering()
		y := b.lowerMembers(m, x)
		l := b.loss(m, y)
		if s == 0 {
			first = b.endLowering(low)
		} else {
			b.relowered(first, b.endLowering(low)) // the same model, its parameters and weight copies once
		}
		if loss == NoValue {
			loss = l
		} else {
			loss = b.Add("loss_sum", loss, l) // loss += loss_next
		}
		next := b.Ew("advance_input", "inputs", []Value{x, y, batch}, b.Shape(x), b.Dtype(x),
			"advance_input: the next step's input, rolled by one date with the prediction's prognostic variables and the next date's forcings written in")
		b.Val(next).Grad = !b.Eval && s < steps-1 // the last one feeds no loss
		x = next
		done()
	}
	b.Val(x).Cached = true // a local until the rollout loop ends
	return loss
}
