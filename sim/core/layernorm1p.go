package core

import "github.com/memsh/memsh/sim/units"

// LayerNormOnePlus is Nemotron's NemotronLayerNorm1P
// (models/nemotron/modeling_nemotron.py at transformers 5.25.0):
//
//	F.layer_norm(x, (dim,), self.weight + 1.0, self.bias, eps)
//
// The sum weight + 1.0 is a new [dim] tensor in the weight's dtype, which
// layer_norm saves for its backward beside x, mean and rstd. Under
// autocast _cast_if_autocast_enabled casts x, weight + 1.0 and the bias
// to the autocast dtype and the norm runs there with autocast off (read
// from the source, not measured: the oracle runs without autocast).
func (b *Builder) LayerNormOnePlus(name string, x Value, dim int64, bias bool) Value {
	defer b.Scope(name)()
	w := b.Param("weight", []int64{dim}, RoleNorm)
	var params []int32
	if bias {
		params = append(params, b.Param("bias", []int64{dim}, RoleNorm))
	}
	iw := b.AddOp("add", "weight_plus_one", nil, w)
	w1 := b.Out(iw, "weight_plus_one", []int64{dim}, b.P.Params[w].Stored(b.Prec), "weight + 1.0, a new tensor layer_norm saves")
	xin := x
	if b.Prec.Autocast {
		if b.Dtype(x) != b.Prec.Compute {
			xin = b.Cast(x, b.Prec.Compute, "autocast copy of NemotronLayerNorm1P's input")
		}
		if b.Dtype(w1) != b.Prec.Compute {
			w1 = b.Cast(w1, b.Prec.Compute, "autocast copy of weight + 1.0")
		}
	}
	i := b.AddOp("layer_norm", "", []Value{xin, w1}, params...)
	y := b.Out(i, "out", b.Shape(xin), b.Dtype(xin), "layer_norm output")
	statsDT := b.Dtype(xin)
	if b.Rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	r := Rows(b.Shape(xin))
	mean := b.Out(i, "mean", []int64{r, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.Out(i, "rstd", []int64{r, 1}, statsDT, "layer_norm rstd (saved)")
	b.Val(mean).Grad, b.Val(rstd).Grad = false, false
	b.Save(i, xin, mean, rstd, w1)
	b.Op(i).Flops = 8 * float64(Numel(b.Shape(xin)))
	b.Op(i).Bytes += float64(b.Val(xin).Bytes)
	return y
}
