package sim

import "github.com/memsh/memsh/sim/units"

// Modules applied to several tensor_split chunks in a row (anemoi's chunked
// projection and node MLP): their parameters are registered once and, under
// autocast, their low-precision weight copy is made once (autocast caches
// the cast of a leaf weight until the autocast region ends).

// chunkLinear is an nn.Linear applied chunk by chunk.
type chunkLinear struct {
	name, role string
	w, bias    int32
	wv         Value // autocast weight copy, made on first use
	in, out    int64
}

func newChunkLinear(b *builder, name, role string, in, out int64, bias bool) *chunkLinear {
	done := b.scope(name)
	l := &chunkLinear{name: name, role: role, in: in, out: out, bias: -1, wv: NoValue}
	l.w = b.param("weight", []int64{out, in}, role)
	if bias {
		l.bias = b.param("bias", []int64{out}, role)
	}
	done()
	return l
}

// apply lowers the matmul for x as builder.linear does: the input cast to
// the autocast dtype (saved when the weight needs a gradient), the weight
// saved when the input needs one. A view input saves its base.
func applyLinear(b *builder, l *chunkLinear, x Value) Value {
	defer b.scope(l.name)()
	dt := b.dtype(x)
	if b.prec.Autocast {
		dt = b.prec.Compute
	}
	xin := b.cast(x, dt, "autocast copy of linear input")
	if l.wv == NoValue {
		l.wv = b.weight(l.w, dt)
	}
	params := []int32{l.w}
	if l.bias >= 0 {
		params = append(params, l.bias)
	}
	ins := []Value{xin}
	if l.wv != NoValue {
		ins = append(ins, l.wv)
	}
	i := b.addOp("matmul", "", ins, params...)
	y := b.out(i, "out", withLast(b.shape(xin), l.out), dt, "output of linear "+b.name(""))
	if b.trainable(l.w) {
		b.save(i, xin, baseTensor(b, xin))
	}
	if b.grad(xin) {
		b.save(i, l.wv)
	}
	b.op(i).Flops = 2 * float64(rows(b.shape(xin))) * float64(l.in) * float64(l.out)
	b.op(i).bytes += float64(b.val(xin).Bytes) + float64(dt.Bytes(l.in*l.out))
	return y
}

// chunkNorm is an nn.LayerNorm applied chunk by chunk.
type chunkNorm struct {
	name   string
	dim    int64
	params []int32
}

func newChunkNorm(b *builder, name string, dim int64) *chunkNorm {
	done := b.scope(name)
	n := &chunkNorm{name: name, dim: dim}
	n.params = []int32{b.param("weight", []int64{dim}, "norm"), b.param("bias", []int64{dim}, "norm")}
	done()
	return n
}

// applyNorm lowers native_layer_norm for x (fp32 under autocast; saves the
// input, mean and rstd; a view input saves its base).
func applyNorm(b *builder, n *chunkNorm, x Value) Value {
	defer b.scope(n.name)()
	xin := x
	if b.prec.Autocast {
		xin = b.cast(x, units.FP32, "autocast fp32 copy of layer_norm input (saved)")
	}
	i := b.addOp("layer_norm", "", []Value{xin}, n.params...)
	y := b.out(i, "out", b.shape(xin), b.dtype(xin), "layer_norm output")
	statsDT := b.dtype(xin)
	if b.rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	r := rows(b.shape(xin))
	mean := b.out(i, "mean", []int64{r, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.out(i, "rstd", []int64{r, 1}, statsDT, "layer_norm rstd (saved)")
	b.val(mean).grad, b.val(rstd).grad = false, false
	b.save(i, xin, baseTensor(b, xin), mean, rstd)
	b.op(i).Flops = 8 * float64(numel(b.shape(xin)))
	b.op(i).bytes += float64(b.val(xin).Bytes)
	return y
}

// base is the tensor a view (viewRows) was taken of, or noValue: saving a
// view keeps its base's storage alive.
func baseTensor(b *builder, v Value) Value {
	pr := b.val(v).producer
	if pr < 0 || b.op(pr).Kind != "view" {
		return NoValue
	}
	return b.op(pr).in[0]
}
