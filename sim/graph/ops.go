package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Lowering helpers used by the graph models (graph_*.go): Python-local
// lifetimes, row slices of a tensor (tensor_split chunks), layer norms over
// a trailing group of features, and plain elementwise ops.

// viewRows is a view of rows of x (tensor_split): no new storage. The
// caller keeps x alive (keepAlive) for as long as the view is used.
func viewRows(b *core.Builder, x core.Value, rows int64, why string) core.Value {
	i := b.AddOp("view", "rows", []core.Value{x})
	y := b.Out(i, b.LastName(x)+".rows", core.WithLast([]int64{rows, 0}, b.Last(x)), b.Dtype(x), why)
	b.Val(y).Bytes = 0
	b.Op(i).Bytes = 0
	return y
}

// castRows is autocast's copy of a row slice of x in dtype dt (the input
// cast of an op applied to one tensor_split chunk); a view when x already
// has dtype dt.
func castRows(b *core.Builder, x core.Value, rows int64, dt units.DType, why string) core.Value {
	if b.Dtype(x) == dt {
		return viewRows(b, x, rows, why)
	}
	i := b.AddOp("cast", "to_"+dt.Name(), []core.Value{x})
	y := b.Out(i, b.LastName(x)+".rows."+dt.Name(), []int64{rows, b.Last(x)}, dt, why)
	b.Op(i).Bytes += float64(b.Dtype(x).Bytes(rows * b.Last(x)))
	return y
}

// normOver lowers aten::native_layer_norm over groups of dim trailing
// features (dim divides the last dimension: a per-head norm when dim is
// the head width), with an optional weight and bias. Under autocast it is
// on the fp32 list: the input is cast to fp32 and the output is fp32. It
// saves the (cast) input, mean and rstd (one per group).
func normOver(b *core.Builder, name string, x core.Value, dim int64, weight, bias bool) core.Value {
	defer b.Scope(name)()
	var params []int32
	if weight {
		params = append(params, b.Param("weight", []int64{dim}, core.RoleNorm))
	}
	if bias {
		params = append(params, b.Param("bias", []int64{dim}, core.RoleNorm))
	}
	xin := x
	if b.Prec.Autocast {
		xin = b.Cast(x, units.FP32, "autocast fp32 copy of layer_norm input (saved)")
	}
	i := b.AddOp("layer_norm", "", []core.Value{xin}, params...)
	y := b.Out(i, "out", b.Shape(xin), b.Dtype(xin), "layer_norm output")
	statsDT := b.Dtype(xin)
	if b.Rt.NormStatsFP32 {
		statsDT = units.FP32
	}
	groups := core.Numel(b.Shape(xin)) / dim
	mean := b.Out(i, "mean", []int64{groups, 1}, statsDT, "layer_norm mean (saved)")
	rstd := b.Out(i, "rstd", []int64{groups, 1}, statsDT, "layer_norm rstd (saved)")
	b.Val(mean).Grad, b.Val(rstd).Grad = false, false
	b.Save(i, xin, mean, rstd)
	b.Op(i).Flops = 8 * float64(core.Numel(b.Shape(xin)))
	b.Op(i).Bytes += float64(b.Val(xin).Bytes)
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
func catRows(b *core.Builder, name string, parts []core.Value, why string) core.Value {
	if len(parts) == 1 {
		return parts[0]
	}
	var n int64
	for _, p := range parts {
		n += core.Rows(b.Shape(p))
	}
	y := b.Ew("cat", name, parts, []int64{n, b.Last(parts[0])}, b.Dtype(parts[0]), why)
	b.Op(b.Val(y).Producer).NoGradB = true
	return y
}
