package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// crpsLoss lowers anemoi's ensemble loss, AlmostFairKernelCRPS
// (training/losses/kcrps.py@training-0.5.1, _kernel_crps), as
// GraphEnsForecaster runs it: inside one activation checkpoint
// (ensforecaster.py@training-0.5.1 l.270-284, gather_and_compute_loss),
// in fp32 (no_autocast=True), over all members at once. x is the model
// output [members * batch, points, vars]; b.members says how many members.
//
// Forward (all transient: it is checkpointed), per sample:
//
//	y_pred.clone()                                   [E, N, V]
//	var  = |preds[..., None] - preds[..., None, :]|  [V, N, E, E]  (abs saves the difference)
//	err  = |preds - target[..., None]|               [V, N, E]     (abs saves the difference)
//	mem_err = err_r * ~diag                          [V, N, E, E]  (err_r is an expand view)
//	(mem_err + mem_err.T) - (1 - eps) * var          three [V, N, E, E] temporaries
//	sum over the member pairs, coef *, scale, sum    [V, N] ... scalar
//
// var and mem_err are Python locals, alive until _kernel_crps returns, so
// six [V, N, E, E] fp32 tensors exist at once: the loss grows with the
// square of the members, whether they ran stacked or one at a time. The
// backward recomputes the region and keeps the two abs inputs. The target
// (batch[0][:, multistep + step, 0, :, output.full], an indexing copy) is
// a checkpoint input held until the loss backward.
func (b *Builder) crpsLoss(x Value) Value {
	e := b.members
	if e < 2 {
		panic(LowerError{&units.Error{Path: "loss", Msg: fmt.Sprintf("the crps loss compares ensemble members: it needs members >= 2 (got %d)", e),
			Hint: "train(..., members=2), or build the model with loss=\"mse\""}})
	}
	s := b.Shape(x)
	rows := s[0]
	if rows%e != 0 {
		panic(LowerError{units.Errorf("loss", "cannot split %d samples into %d members", rows, e)})
	}
	bs := rows / e
	per := Numel(s) / rows // points x variables per member and sample
	dt := b.Dtype(x)
	target := b.Ew("index", "target", nil, []int64{bs, per}, dt, "loss target (indexing copy of the batch)")
	b.Val(target).Grad = false
	defer b.BeginRegion("")()
	pairs := []int64{bs, per, e, e}
	c := b.Ew("clone", "y_pred", []Value{x}, s, dt, "y_pred.clone() in the checkpointed loss (gather_and_compute_loss)")
	diff := b.Ew("sub", "pair_diff", []Value{c}, pairs, dt, "member-pair differences preds[..., None] - preds[..., None, :] (crps)")
	va := b.Ew("abs", "var", []Value{diff}, pairs, dt, "|member-pair differences| (crps var)")
	b.Save(b.Val(va).Producer, diff)
	d := b.Ew("sub", "err_diff", []Value{c, target}, []int64{bs, per, e}, dt, "preds - target (crps)")
	er := b.Ew("abs", "err", []Value{d}, []int64{bs, per, e}, dt, "|preds - target| (crps)")
	b.Save(b.Val(er).Producer, d)
	mem := b.Ew("mul", "mem_err", []Value{er}, pairs, dt, "err_r * ~diag over member pairs (crps)")
	s1 := b.Ew("add", "mem_err_sym", []Value{mem}, pairs, dt, "mem_err + mem_err.T (crps)")
	s2 := b.Ew("mul", "var_scaled", []Value{va}, pairs, dt, "(1 - eps) * var (crps)")
	s3 := b.Ew("sub", "pair_terms", []Value{s1, s2}, pairs, dt, "crps member-pair terms")
	r := b.Ew("sum", "kcrps", []Value{s3}, []int64{bs, per}, dt, "point-wise kernel crps")
	b.KeepAlive("kcrps_locals", va, mem)
	sc := b.Ew("mul", "scaled", []Value{r}, []int64{bs, per}, dt, "crps times the loss scalers")
	i := b.AddOp("sum", "sum", []Value{sc})
	return b.Out(i, "loss", nil, units.FP32, "loss")
}
