package sim

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Lowering helpers used by the graph models (graph_*.go): Python-local
// lifetimes, row slices of a tensor (tensor_split chunks), layer norms over
// a trailing group of features, and plain elementwise ops.

// viewRows is a view of rows of x (tensor_split): no new storage. The
// caller keeps x alive (keepAlive) for as long as the view is used.
func viewRows(b *builder, x Value, rows int64, why string) Value {
	i := b.addOp("view", "rows", []Value{x})
	y := b.out(i, b.lastName(x)+".rows", withLast([]int64{rows, 0}, b.last(x)), b.dtype(x), why)
	b.val(y).Bytes = 0
	b.op(i).bytes = 0
	return y
}

// castRows is autocast's copy of a row slice of x in dtype dt (the input
// cast of an op applied to one tensor_split chunk); a view when x already
// has dtype dt.
func castRows(b *builder, x Value, rows int64, dt units.DType, why string) Value {
	if b.dtype(x) == dt {
		return viewRows(b, x, rows, why)
	}
	i := b.addOp("cast", "to_"+dt.Name(), []Value{x})
	y := b.out(i, b.lastName(x)+".rows."+dt.Name(), []int64{rows, b.last(x)}, dt, why)
	b.op(i).bytes += float64(b.dtype(x).Bytes(rows * b.last(x)))
	return y
}

// normOver lowers aten::native_layer_norm over groups of dim trailing
// features (dim divides the last dimension: a per-head norm when dim is
// the head width), with an optional weight and bias. Under autocast it is
// on the fp32 list: the input is cast to fp32 and the output is fp32. It
// saves the (cast) input, mean and rstd (one per group).
func normOver(b *builder, name string, x Value, dim int64, weight, bias bool) Value {
	defer b.scope(name)()
	var params []int32
	if weight {
		params = append(params, b.param("weight", []int64{dim}, "norm"))
	}
	if bias {
		params = append(params, b.param("bias", []int64{dim}, "norm"))
	}
	xin := x
	if b.prec.Autocast {
		xin = b.cast(x, units.FP32, "autocast fp32 copy of layer_norm input (saved)")
	}
	i := b.addOp("layer_norm", "", []Value{xin}, params...)
	y := b.out(i, "out", b.shape(xin), b.dtype(xin), "layer_norm output")
	statsDT := b.dtype(xin)
	if b.rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	groups := numel(b.shape(xin)) / dim
	mean := b.out(i, "mean", []int64{groups, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.out(i, "rstd", []int64{groups, 1}, statsDT, "layer_norm rstd (saved)")
	b.val(mean).grad, b.val(rstd).grad = false, false
	b.save(i, xin, mean, rstd)
	b.op(i).Flops = 8 * float64(numel(b.shape(xin)))
	b.op(i).bytes += float64(b.val(xin).Bytes)
	return y
}

// splitRows returns torch.tensor_split's chunk sizes of n rows into k
// chunks: the first n % k chunks get one row more.
func splitRows(n, k int64) []int64 {
	out := make([]int64, k)
	for i := range out {
		out[i] = n / k
		if int64(i) < n%k {
			out[i]++
		}
	}
	return out
}

// chunkScope names chunk i of k ("chunk3"), or "" when there is one chunk.
func chunkScope(i, k int64) string {
	if k == 1 {
		return ""
	}
	return fmt.Sprintf("chunk%d", i)
}

// catRows is torch.cat of row chunks (one chunk: no copy). Its backward
// hands each chunk a view of the gradient.
func catRows(b *builder, name string, parts []Value, why string) Value {
	if len(parts) == 1 {
		return parts[0]
	}
	var n int64
	for _, p := range parts {
		n += rows(b.shape(p))
	}
	y := b.ew("cat", name, parts, []int64{n, b.last(parts[0])}, b.dtype(parts[0]), why)
	b.op(b.val(y).producer).noGradB = true
	return y
}
