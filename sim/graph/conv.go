package graph

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// edgeAttention is GraphTransformerConv's message passing over a graph's
// edges (layers/conv.py and GraphTransformerBaseBlock.attention_block,
// block.py @models-0.8.1), shared by the mappers (mapper.go) and the
// graph-transformer processor (processor_gt.go).
type edgeAttention struct {
	channels, heads int64
	wrapped         bool   // each conv call under a checkpoint of its own (wrap.go)
	backend         string // BackendPyG or BackendTriton (conv_triton.go)
}

// block lowers GraphTransformerBaseBlock.attention_block (block.py
// @models-0.8.1 l.556-584) over r destination rows and e edges in k
// chunks: one conv, or the chunked loop.
func (g edgeAttention) block(b *core.Builder, q, key, val, edges, ei core.Value, r, e, k int64) core.Value {
	if k > 1 {
		return g.chunkedAttention(b, q, key, val, edges, ei, r, e, k)
	}
	return g.conv(b, "conv", q, key, val, edges, ei, r, e)
}

// projectChunks lowers the blocks' out = torch.cat([self.projection(chunk)
// for chunk in torch.tensor_split(out + x_r, num_chunks)]) for the
// attention output att (fp32) and x_r over r rows of c channels: out + x_r
// over all rows, autocast's copy of each chunk into the projection, the
// concatenation. att stays alive (the local `out`) until the cat.
func projectChunks(b *core.Builder, att, xr core.Value, r, c, k int64) core.Value {
	sum := b.Ew("add", "out_plus_x_r", []core.Value{att, xr}, []int64{r, c}, core.Promote(b.Dtype(att), b.Dtype(xr)),
		"out + x_r over all destination rows (fp32: the attention output is fp32)")
	cdt := b.Dtype(xr)
	proj := newChunkLinear(b, "projection", core.RoleO, c, c, true)
	var parts []core.Value
	for i, n := range splitRows(r, k) {
		done := b.Scope(chunkScope(int64(i), k))
		parts = append(parts, applyLinear(b, proj, castRows(b, sum, n, cdt, "autocast copy of a tensor_split chunk of out + x_r (projection input)")))
		done()
	}
	b.KeepAlive("split_out_plus_x_r", sum)
	out := catRows(b, "projection_cat", parts, "projections of the chunks, concatenated")
	b.KeepAlive("accumulator", att) // the old `out` until the cat is assigned
	return out
}

// chunkedAttention lowers attention_block with num_chunks > 1:
// sort_edges_1hop_chunks copies each chunk's edges (bipartite_subgraph,
// khop_edges.py@models-0.8.1 l.90-132), then an fp32 accumulator over all
// destination rows (torch.zeros with no dtype) receives every chunk's
// message passing (out += self.conv(...)).
func (g edgeAttention) chunkedAttention(b *core.Builder, q, key, val, edges, ei core.Value, r, e, k int64) core.Value {
	c := g.channels
	src := core.Rows(b.Shape(key))
	counts := ChunkEdges(e, r, k)
	var attrs, idx []core.Value
	done := b.Scope("sort_edges")
	for i, n := range counts {
		op := b.AddOp("index", chunkScope(int64(i), k), []core.Value{edges, ei})
		a := b.Out(op, chunkScope(int64(i), k)+".edge_attr", []int64{n, c}, b.Dtype(edges), "edge features of one chunk (bipartite_subgraph copy)")
		x := b.Out(op, chunkScope(int64(i), k)+".edge_index", []int64{2, n}, units.INT64, "edge index of one chunk (bipartite_subgraph copy)")
		b.Val(x).Grad = false
		b.Op(op).WorkF = src + r + e // bool node and edge masks
		// IndexBackward: zeros_like(edges).index_put_(mask, grad), a full-size tensor per chunk.
		b.Op(op).WorkB = b.Val(edges).Bytes
		attrs, idx = append(attrs, a), append(idx, x)
	}
	done()
	acc := b.Ew("zeros", "out", nil, []int64{r, c}, units.FP32,
		fmt.Sprintf("fp32 accumulator torch.zeros([%d, %d, %d]) over all destination rows (no dtype: fp32)", r, g.heads, c/g.heads))
	b.Val(acc).Grad = !b.Eval
	for i := range counts {
		s := g.conv(b, "conv."+chunkScope(int64(i), k), q, key, val, attrs[i], idx[i], r, counts[i])
		// out += conv(...): in place over all destination rows, whatever the
		// chunk's edges: one TensorIterator add reading out and the chunk's
		// scatter output and writing out (block.py@models-0.8.1 l.573-582).
		// Its backward hands the gradient through: no kernel.
		add := b.AddOp("add_", "accumulate."+chunkScope(int64(i), k), []core.Value{acc, s})
		b.Op(add).Bytes = float64(2*b.Val(acc).Bytes + b.Val(s).Bytes)
	}
	b.KeepAlive("edge_chunks", append(attrs, idx...)...) // the lists live until attention_block returns
	return acc
}

// chunkEdges splits e edges over the k tensor_split chunks of r
// destination rows: exactly per-row when every row has the same in-degree
// (knn), in proportion to the rows otherwise.
func ChunkEdges(e, r, k int64) []int64 {
	sizes := splitRows(r, k)
	out := make([]int64, k)
	if e%r == 0 {
		for i, n := range sizes {
			out[i] = e / r * n
		}
		return out
	}
	var cum, prev int64
	for i, n := range sizes {
		cum += n
		at := int64(math.Floor(float64(e) * float64(cum) / float64(r)))
		if i == len(sizes)-1 {
			at = e
		}
		out[i] = at - prev
		prev = at
	}
	return out
}

// conv lowers GraphTransformerConv.forward (conv.py@models-0.8.1 l.81-144)
// for one chunk of ne edges: PyG's propagate collects query_i, key_j and
// value_j (index_select; the collected dict holds them until propagate
// returns), message() builds the attention weights and the message, and
// the sum aggregation scatters it into a NEW tensor over all r destination
// rows (dim_size = query.shape[0]).
func (g edgeAttention) conv(b *core.Builder, name string, q, key, val, attr, idx core.Value, r, ne int64) core.Value {
	if g.backend == BackendTriton {
		return g.tritonConv(b, name, q, key, val, attr, idx, r, ne)
	}
	defer b.Scope(name)()
	if g.wrapped {
		defer b.BeginNestedRegion("")()
	}
	c, h := g.channels, g.heads
	qi := gatherRows(b, "query_i", q, idx, ne)
	b.Op(b.Val(qi).Producer).SortedIndex = true // edges grouped by destination (anemoi's edge builders)
	kj := gatherRows(b, "key_j", key, idx, ne)
	vj := gatherRows(b, "value_j", val, idx, ne)
	// message: key_j = key_j + edge_attr; alpha = (query_i * key_j).sum(-1) / sqrt(d)
	ke := b.Add("key_j_plus_edge", kj, attr)
	prod := b.Mul("query_key", qi, ke)
	if b.Prec.Autocast {
		prod = b.Cast(prod, units.FP32, "autocast fp32 copy of query_i * key_j (sum is on the fp32 list)")
	}
	score := b.Ew("sum", "alpha_raw", []core.Value{prod}, []int64{ne, h}, b.Dtype(prod), "attention scores per edge and head")
	alpha := edgeSoftmax(b, score, idx, r, ne, h)
	// (value_j + edge_attr) * alpha: bf16 x fp32 promotes to an fp32 message.
	ve := b.Add("value_j_plus_edge", vj, attr)
	msg := b.Mul("message", ve, alpha)
	// aggregate: torch_geometric.utils.scatter(reduce="sum") =
	// src.new_zeros(size).scatter_add_(...): a new tensor of the message's dtype.
	i := b.AddOp("scatter_add", "scatter", []core.Value{msg, idx})
	s := b.Out(i, "scatter_out", []int64{r, c}, b.Dtype(msg),
		fmt.Sprintf("PyG scatter output of one edge chunk: a new %s [%d, %d, %d] over ALL destination rows, whatever the chunk's edges "+
			"(torch_geometric.utils.scatter sum: src.new_zeros(size).scatter_add_; GraphTransformerConv dim_size = query.shape[0])",
			b.Dtype(msg), r, h, c/h))
	b.Save(i, idx)
	b.Op(i).Flops = float64(ne * c)
	b.KeepAlive("collected", qi, kj, vj)
	return s
}

// gatherRows is PyG's collect of x_i / x_j: src.index_select(0, index)
// ([edges, H, d]). It saves the index; its backward builds a zero tensor
// of src's size per call and index_adds into it.
func gatherRows(b *core.Builder, name string, src, idx core.Value, ne int64) core.Value {
	i := b.AddOp("index_select", name, []core.Value{src, idx})
	y := b.Out(i, name, []int64{ne, b.Last(src)}, b.Dtype(src), name+" gathered per edge (index_select)")
	b.Save(i, idx)
	b.Op(i).WorkB = b.Val(src).Bytes
	b.Op(i).Flops = float64(ne * b.Last(src))
	return y
}

// edgeSoftmax lowers torch_geometric.utils.softmax over the edges of each
// destination node: a detached scatter-max and a scatter-sum over all r
// destination rows ([r, heads] each), exp (saves its result) and the
// division (saves the gathered denominator).
func edgeSoftmax(b *core.Builder, score, idx core.Value, r, ne, h int64) core.Value {
	dt := b.Dtype(score)
	i := b.AddOp("softmax", "softmax", []core.Value{score, idx})
	ex := b.Out(i, "exp", []int64{ne, h}, dt, "exp of the shifted scores (saved)")
	den := b.Out(i, "denominator", []int64{ne, h}, dt, "softmax denominator gathered per edge (saved)")
	alpha := b.Out(i, "alpha", []int64{ne, h}, dt, "attention weights per edge and head")
	b.Val(ex).Grad, b.Val(den).Grad = false, false
	b.Save(i, ex, den)
	b.Op(i).WorkF = 2*dt.Bytes(r*h) + 2*dt.Bytes(ne*h)
	b.Op(i).Flops = 6 * float64(ne*h)
	return alpha
}
