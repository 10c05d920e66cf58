package core

import "github.com/memsh/memsh/sim/units"

// LayerNormView is LayerNorm (aten::native_layer_norm, a weight and with
// bias a bias of dim) over a view of x shaped shape, whose last dim is dim
// and whose elements are a part of x's (Persimmon's q_layernorm and
// k_layernorm over q's and k's heads, strided views of query_key_value's
// output: Attention.QKNormLayer). The norm reads the view in place and
// saves it, so x's whole storage is what its backward keeps (the oracle:
// hf_block_saved.py lists the fused output, not a copy); mean and rstd
// are one a row of the view. Under autocast the fp32 copy is of the view
// alone. The output is a new tensor of shape.
func (b *Builder) LayerNormView(name string, x Value, shape []int64, dim int64, bias bool) Value {
	defer b.Scope(name)()
	w := b.Param("weight", []int64{dim}, RoleNorm)
	params := []int32{w}
	if bias {
		params = append(params, b.Param("bias", []int64{dim}, RoleNorm))
	}
	xin, dt := x, b.Dtype(x)
	if b.Prec.Autocast {
		c := b.AddOp("cast", "to_fp32", []Value{x})
		xin, dt = b.Out(c, "view.fp32", shape, units.FP32, "autocast fp32 copy of the normalised view"), units.FP32
	}
	i := b.AddOp("layer_norm", "", []Value{xin}, params...)
	y := b.Out(i, "out", shape, dt, "layer_norm output")
	statsDT := dt
	if b.Rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	r := Rows(shape)
	mean := b.Out(i, "mean", []int64{r, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.Out(i, "rstd", []int64{r, 1}, statsDT, "layer_norm rstd (saved)")
	b.Val(mean).Grad, b.Val(rstd).Grad = false, false
	b.Save(i, xin, mean, rstd)
	b.Op(i).Flops = 8 * float64(Numel(shape))
	b.Op(i).Bytes += float64(dt.Bytes(Numel(shape)))
	return y
}
