package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// lingForgetGate lowers BailingHybridForgetGate (Ling 3's KDA,
// FullRankGates): f = f_proj(x).float() + dt_bias, then
//
//	SafeGate: lower_bound * sigmoid(exp(A_log) * f)   # the product saves exp(A_log) and f, sigmoid its output
//	else:     -exp(A_log) * softplus(f)                # softplus saves f, the product -exp(A_log) and softplus(f)
//
// exp saves its output, [heads] fp32 (A_log kept fp32); the gate is cast
// to the hidden state's dtype for the delta rule. dt_bias and A_log stay
// fp32 (BailingHybridPreTrainedModel's _keep_in_fp32_modules_strict).
func (a *KimiDeltaAttention) lingForgetGate(b *core.Builder, x core.Value, s []int64) core.Value {
	defer b.Scope("forget_gate")()
	w := a.width()
	f := b.Linear("f_proj", core.RoleLinear, x, a.Dim, w, false)
	aLog := b.Param("A_log", []int64{a.Heads}, core.RoleLinear)
	keepParamFP32(b, "A_log")
	bias := b.Param("dt_bias", []int64{w}, core.RoleLinear)
	keepParamFP32(b, "dt_bias")
	i := b.AddOp("kda_forget_gate", "g", []core.Value{f}, aLog, bias)
	per := core.WithLast(s, w)
	g := b.Out(i, "g", per, b.Dtype(f), "the log decay per channel, cast to the hidden state's dtype: the delta rule's g")
	specs := []savedSpec{
		{"exp_A", []int64{a.Heads}, units.FP32, "exp(A_log), saved by exp"},
		{"f_fp32", per, units.FP32, "f_proj(x).float() + dt_bias, saved by the product (safe gate) or softplus"},
	}
	if a.SafeGate {
		specs = append(specs, savedSpec{"sigmoid", per, units.FP32, "sigmoid(exp(A_log) * f), saved by sigmoid"})
	} else {
		specs = append(specs, savedSpec{"neg_exp_A", []int64{a.Heads}, units.FP32, "-exp(A_log), saved by the product"},
			savedSpec{"softplus", per, units.FP32, "softplus(f), saved by the product"})
	}
	b.Save(i, savedOuts(b, i, specs)...)
	// The fp32 product and sigmoid's fp32 output live beside the cast.
	b.Op(i).WorkF = 2 * units.FP32.Bytes(core.Numel(per))
	b.Op(i).Flops = 4 * float64(core.Numel(per))
	return g
}
