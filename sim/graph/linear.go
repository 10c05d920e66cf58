package graph

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Modules applied to several tensor_split chunks in a row (anemoi's chunked
// projection and node MLP): their parameters are registered once and, under
// autocast, their low-precision weight copy is made once (autocast caches
// the cast of a leaf weight until the autocast region ends).

// chunkLinear is an nn.Linear applied chunk by chunk.
type chunkLinear struct {
	name    string
	role    core.Role
	w, bias int32
	wv      core.Value // autocast weight copy, made on first use
	in, out int64
}

func newChunkLinear(b *core.Builder, name string, role core.Role, in, out int64, bias bool) *chunkLinear {
	done := b.Scope(name)
	l := &chunkLinear{name: name, role: role, in: in, out: out, bias: -1, wv: core.NoValue}
	l.w = b.Param("weight", []int64{out, in}, role)
	if bias {
		l.bias = b.Param("bias", []int64{out}, role)
	}
	done()
	return l
}

// apply lowers the matmul for x as builder.linear does: the input cast to
// the autocast dtype (saved when the weight needs a gradient), the weight
// saved when the input needs one. A view input saves its base.
func applyLinear(b *core.Builder, l *chunkLinear, x core.Value) core.Value {
	defer b.Scope(l.name)()
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	xin := b.Cast(x, dt, "autocast copy of linear input")
	if l.wv == core.NoValue {
		l.wv = b.Weight(l.w, dt)
	}
	params := []int32{l.w}
	if l.bias >= 0 {
		params = append(params, l.bias)
	}
	ins := []core.Value{xin}
	if l.wv != core.NoValue {
		ins = append(ins, l.wv)
	}
	i := b.AddOp("matmul", "", ins, params...)
	y := b.Out(i, "out", core.WithLast(b.Shape(xin), l.out), dt, "output of linear "+b.Name(""))
	if b.Trainable(l.w) {
		b.Save(i, xin, baseTensor(b, xin))
	}
	if b.Grad(xin) {
		b.Save(i, l.wv)
	}
	b.Op(i).Flops = 2 * float64(core.Rows(b.Shape(xin))) * float64(l.in) * float64(l.out)
	b.Op(i).Bytes += float64(b.Val(xin).Bytes) + float64(dt.Bytes(l.in*l.out))
	return y
}

// chunkNorm is an nn.LayerNorm applied chunk by chunk.
type chunkNorm struct {
	name   string
	dim    int64
	params []int32
}

func newChunkNorm(b *core.Builder, name string, dim int64) *chunkNorm {
	done := b.Scope(name)
	n := &chunkNorm{name: name, dim: dim}
	n.params = []int32{b.Param("weight", []int64{dim}, core.RoleNorm), b.Param("bias", []int64{dim}, core.RoleNorm)}
	done()
	return n
}

// applyNorm lowers native_layer_norm for x (fp32 under autocast; saves the
// input, mean and rstd; a view input saves its base).
func applyNorm(b *core.Builder, n *chunkNorm, x core.Value) core.Value {
	defer b.Scope(n.name)()
	xin := x
	if b.Prec.Autocast {
		xin = b.Cast(x, units.FP32, "autocast fp32 copy of layer_norm input (saved)")
	}
	i := b.AddOp("layer_norm", "", []core.Value{xin}, n.params...)
	y := b.Out(i, "out", b.Shape(xin), b.Dtype(xin), "layer_norm output")
	statsDT := b.Dtype(xin)
	if b.Rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	r := core.Rows(b.Shape(xin))
	mean := b.Out(i, "mean", []int64{r, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.Out(i, "rstd", []int64{r, 1}, statsDT, "layer_norm rstd (saved)")
	b.Val(mean).Grad, b.Val(rstd).Grad = false, false
	b.Save(i, xin, baseTensor(b, xin), mean, rstd)
	b.Op(i).Flops = 8 * float64(core.Numel(b.Shape(xin)))
	b.Op(i).Bytes += float64(b.Val(xin).Bytes)
	return y
}

// base is the tensor a view (viewRows) was taken of, or noValue: saving a
// view keeps its base's storage alive.
func baseTensor(b *core.Builder, v core.Value) core.Value {
	pr := b.Val(v).Producer
	if pr < 0 || b.Op(pr).Kind != "view" {
		return core.NoValue
	}
	return b.Op(pr).In[0]
}
