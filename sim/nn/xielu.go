package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// xielu is transformers' XIELUActivation as its Python path runs it (the
// CUDA kernel is an optional wheel, not installed by transformers;
// activations.py _xielu_python at 5.25.0): two trained scalars, act_fn's
// alpha_p and alpha_n ([1] each), the buffers beta and eps (0-dim), and
//
//	alpha_p = softplus(alpha_p); alpha_n = beta + softplus(alpha_n)
//	where(x > 0, alpha_p*x*x + beta*x, (expm1(min(x, eps)) - x)*alpha_n + beta*x)
//
// whose backward keeps x, softplus(alpha_p), alpha_p*x, beta and eps,
// expm1's output, the difference, alpha_n and the bool condition: four
// [rows, hidden] tensors beside x and the mask (checked against
// hf_block_saved.py's listing, transformers 5.25.0, torch 2.15.0, CPU).
func xielu(b *core.Builder, x core.Value) core.Value {
	defer b.Scope("act_fn")()
	s, dt := b.Shape(x), b.Dtype(x)
	scalar := func(name string, shape []int64, why string) core.Value {
		i := b.AddOp("buffer", name, nil)
		return b.Out(i, name, shape, dt, why)
	}
	softplus := func(param string) core.Value {
		p := b.Param(param, []int64{1}, core.RoleNorm)
		i := b.AddOp("softplus", param+"_softplus", nil, p)
		return b.Out(i, param+"_softplus", []int64{1}, dt, "softplus of "+param)
	}
	beta := scalar("beta", []int64{}, "the beta buffer, saved by beta * x")
	eps := scalar("eps", []int64{}, "the eps buffer, saved by min(x, eps)")
	ap := softplus("alpha_p")
	mul := func(name string, a, c core.Value, saved ...core.Value) core.Value {
		i := b.AddOp("mul", name, []core.Value{a, c})
		y := b.Out(i, name, s, dt, name)
		b.Save(i, saved...)
		b.Op(i).Flops = float64(core.Numel(s))
		return y
	}
	apx := mul("alpha_p_x", ap, x, ap, x)
	pos := mul("alpha_p_x_x", apx, x, apx, x)
	bx := mul("beta_x", beta, x, beta)
	pos = b.Add("positive", pos, bx)
	mi := b.AddOp("minimum", "min_eps", []core.Value{x, eps})
	m := b.Out(mi, "min_eps", s, dt, "min(x, eps)")
	b.Save(mi, x, eps)
	e := b.Unary("expm1", m, false, true)
	d := b.Ew("sub", "expm1_minus_x", []core.Value{e, x}, s, dt, "expm1(min(x, eps)) - x")
	an := b.Add("alpha_n", softplus("alpha_n"), beta)
	neg := mul("alpha_n_d", d, an, d, an)
	neg = b.Add("negative", neg, mul("beta_x_neg", beta, x, beta))
	gi := b.AddOp("gt", "positive_mask", []core.Value{x})
	cond := b.Out(gi, "x_gt_0", s, units.BOOL, "x > 0")
	wi := b.AddOp("where", "xielu", []core.Value{cond, pos, neg})
	y := b.Out(wi, "xielu", s, dt, "xIELU's output")
	b.Save(wi, cond)
	return y
}
