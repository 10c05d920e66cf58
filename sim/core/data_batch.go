package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// DataBatch is the data loader's batch of a model whose input the
// training step builds from it (anemoi's forecasters). Lightning moves the
// batch to the device before training_step and holds it until the step
// ends; the model's input is derived from it inside the step and is a
// local of the rollout loop, freed before the backward.
//
// anemoi (train/forecaster/ensforecaster.py@training-0.5.1, rollout_step):
// batch[0] is [batch, multistep + rollout, 1, points, variables] fp32 with
// every dataset variable (prognostic, forcings, diagnostics), normalised
// in place in training; in validation (in_place=not validation_mode) a
// normalised clone takes its place in the batch list and the loaded
// tensor is freed. The initial conditions x =
// ensemble_ic_generator(batch[0]) (index copy, then one copy per member)
// live until the rollout loop builds the next input (rollout.go). memsh lumps x, its skip copy and the
// forecast-step column into the model input [batch * members, points,
// inputs] (graph/model.go).
type DataBatch struct {
	Times     int64 // dates per sample: multistep_input + rollout
	Variables int64 // dataset variables per point
}

func (d *DataBatch) Validate(path string) error {
	if d.Times <= 0 || d.Variables <= 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("data_dates and data_variables must be positive (got %d, %d)", d.Times, d.Variables),
			Hint: "data_dates is multistep_input + rollout (anemoi: 2 + 1); data_variables counts every dataset variable per point"}
	}
	return nil
}

// lowerInput adds the data batch as the program input (held for the
// step) and returns the model input built from it: shape [batch * members,
// points, inputs] in dtype dt.
func (d *DataBatch) lowerInput(b *Builder, shape []int64, dt units.DType) Value {
	bs := b.Batch / b.foldedMembers()
	points := shape[1]
	if !ProductFits(bs*d.Times, points, d.Variables, 4) {
		panic(LowerError{units.Errorf("data", "a data batch of %d x %d x %d x %d is too large to count in bytes", bs, d.Times, points, d.Variables)})
	}
	raw := b.input("batch", []int64{bs, d.Times, 1, points, d.Variables}, units.FP32)
	b.P.Values[raw].Why = "the data loader's batch, every dataset variable, on the device for the whole step"
	b.P.Input = raw
	src := raw
	if b.Eval {
		// batch[0] = pre_processors(batch[0], in_place=False): a clone,
		// normalised, replaces the loaded tensor in Lightning's batch list,
		// which then has no other reference.
		src = b.Ew("normalize", "batch_normalized", []Value{raw}, b.Shape(raw), units.FP32,
			"normalised copy of the batch (validation normalises out of place: in_place=not validation_mode)")
		b.Val(src).Grad = false
		b.P.Held = append(b.P.Held, src)
		b.P.InputTransient = true
	}
	x := b.Ew("index", "inputs", []Value{src}, shape, dt,
		"model input built from the batch: initial conditions per member, skip copy, forecast step (a local of the rollout loop)")
	b.Val(x).Grad = false
	return x // its lifetime is the rollout loop's
}
