package sim

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/units"
)

// edgeAttention is GraphTransformerConv's message passing over a graph's
// edges (layers/conv.py and GraphTransformerBaseBlock.attention_block,
// block.py @models-0.8.1), shared by the mappers (graph_mapper.go) and the
// graph-transformer processor (graph_processor_gt.go).
type edgeAttention struct {
	channels, heads int64
}

// block lowers GraphTransformerBaseBlock.attention_block (block.py
// @models-0.8.1 l.556-584) over r destination rows and e edges in k
// chunks: one conv, or the chunked loop.
func (g edgeAttention) block(b *builder, q, key, val, edges, ei Value, r, e, k int64) Value {
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
func projectChunks(b *builder, att, xr Value, r, c, k int64) Value {
	sum := b.ew("add", "out_plus_x_r", []Value{att, xr}, []int64{r, c}, promote(b.dtype(att), b.dtype(xr)),
		"out + x_r over all destination rows (fp32: the attention output is fp32)")
	cdt := b.dtype(xr)
	proj := newChunkLinear(b, "projection", "o", c, c, true)
	var parts []Value
	for i, n := range splitRows(r, k) {
		done := b.scope(chunkScope(int64(i), k))
		parts = append(parts, applyLinear(b, proj, castRows(b, sum, n, cdt, "autocast copy of a tensor_split chunk of out + x_r (projection input)")))
		done()
	}
	b.keepAlive("split_out_plus_x_r", sum)
	out := catRows(b, "projection_cat", parts, "projections of the chunks, concatenated")
	b.keepAlive("accumulator", att) // the old `out` until the cat is assigned
	return out
}

// chunkedAttention lowers attention_block with num_chunks > 1:
// sort_edges_1hop_chunks copies each chunk's edges (bipartite_subgraph,
// khop_edges.py@models-0.8.1 l.90-132), then an fp32 accumulator over all
// destination rows (torch.zeros with no dtype) receives every chunk's
// message passing (out += self.conv(...)).
func (g edgeAttention) chunkedAttention(b *builder, q, key, val, edges, ei Value, r, e, k int64) Value {
	c := g.channels
	src := rows(b.shape(key))
	counts := chunkEdges(e, r, k)
	var attrs, idx []Value
	done := b.scope("sort_edges")
	for i, n := range counts {
		op := b.addOp("index", chunkScope(int64(i), k), []Value{edges, ei})
		a := b.out(op, chunkScope(int64(i), k)+".edge_attr", []int64{n, c}, b.dtype(edges), "edge features of one chunk (bipartite_subgraph copy)")
		x := b.out(op, chunkScope(int64(i), k)+".edge_index", []int64{2, n}, units.INT64, "edge index of one chunk (bipartite_subgraph copy)")
		b.val(x).grad = false
		b.op(op).workF = src + r + e // bool node and edge masks
		// IndexBackward: zeros_like(edges).index_put_(mask, grad), a full-size tensor per chunk.
		b.op(op).workB = b.val(edges).Bytes
		attrs, idx = append(attrs, a), append(idx, x)
	}
	done()
	acc := b.ew("zeros", "out", nil, []int64{r, c}, units.FP32,
		fmt.Sprintf("fp32 accumulator torch.zeros([%d, %d, %d]) over all destination rows (no dtype: fp32)", r, g.heads, c/g.heads))
	b.val(acc).grad = !b.eval
	for i := range counts {
		s := g.conv(b, "conv."+chunkScope(int64(i), k), q, key, val, attrs[i], idx[i], r, counts[i])
		b.addOp("add_", "accumulate."+chunkScope(int64(i), k), []Value{acc, s}) // in place
	}
	b.keepAlive("edge_chunks", append(attrs, idx...)...) // the lists live until attention_block returns
	return acc
}

// chunkEdges splits e edges over the k tensor_split chunks of r
// destination rows: exactly per-row when every row has the same in-degree
// (knn), in proportion to the rows otherwise.
func chunkEdges(e, r, k int64) []int64 {
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
func (g edgeAttention) conv(b *builder, name string, q, key, val, attr, idx Value, r, ne int64) Value {
	defer b.scope(name)()
	c, h := g.channels, g.heads
	qi := gatherRows(b, "query_i", q, idx, ne)
	kj := gatherRows(b, "key_j", key, idx, ne)
	vj := gatherRows(b, "value_j", val, idx, ne)
	// message: key_j = key_j + edge_attr; alpha = (query_i * key_j).sum(-1) / sqrt(d)
	ke := b.add("key_j_plus_edge", kj, attr)
	prod := b.mul("query_key", qi, ke)
	if b.prec.Autocast {
		prod = b.cast(prod, units.FP32, "autocast fp32 copy of query_i * key_j (sum is on the fp32 list)")
	}
	score := b.ew("sum", "alpha_raw", []Value{prod}, []int64{ne, h}, b.dtype(prod), "attention scores per edge and head")
	alpha := edgeSoftmax(b, score, idx, r, ne, h)
	// (value_j + edge_attr) * alpha: bf16 x fp32 promotes to an fp32 message.
	ve := b.add("value_j_plus_edge", vj, attr)
	msg := b.mul("message", ve, alpha)
	// aggregate: torch_geometric.utils.scatter(reduce="sum") =
	// src.new_zeros(size).scatter_add_(...): a new tensor of the message's dtype.
	i := b.addOp("scatter_add", "scatter", []Value{msg, idx})
	s := b.out(i, "scatter_out", []int64{r, c}, b.dtype(msg),
		fmt.Sprintf("PyG scatter output of one edge chunk: a new %s [%d, %d, %d] over ALL destination rows, whatever the chunk's edges "+
			"(torch_geometric.utils.scatter sum: src.new_zeros(size).scatter_add_; GraphTransformerConv dim_size = query.shape[0])",
			b.dtype(msg), r, h, c/h))
	b.save(i, idx)
	b.op(i).Flops = float64(ne * c)
	b.keepAlive("collected", qi, kj, vj)
	return s
}

// gatherRows is PyG's collect of x_i / x_j: src.index_select(0, index)
// ([edges, H, d]). It saves the index; its backward builds a zero tensor
// of src's size per call and index_adds into it.
func gatherRows(b *builder, name string, src, idx Value, ne int64) Value {
	i := b.addOp("index_select", name, []Value{src, idx})
	y := b.out(i, name, []int64{ne, b.last(src)}, b.dtype(src), name+" gathered per edge (index_select)")
	b.save(i, idx)
	b.op(i).workB = b.val(src).Bytes
	b.op(i).Flops = float64(ne * b.last(src))
	return y
}

// edgeSoftmax lowers torch_geometric.utils.softmax over the edges of each
// destination node: a detached scatter-max and a scatter-sum over all r
// destination rows ([r, heads] each), exp (saves its result) and the
// division (saves the gathered denominator).
func edgeSoftmax(b *builder, score, idx Value, r, ne, h int64) Value {
	dt := b.dtype(score)
	i := b.addOp("softmax", "softmax", []Value{score, idx})
	ex := b.out(i, "exp", []int64{ne, h}, dt, "exp of the shifted scores (saved)")
	den := b.out(i, "denominator", []int64{ne, h}, dt, "softmax denominator gathered per edge (saved)")
	alpha := b.out(i, "alpha", []int64{ne, h}, dt, "attention weights per edge and head")
	b.val(ex).grad, b.val(den).grad = false, false
	b.save(i, ex, den)
	b.op(i).workF = 2*dt.Bytes(r*h) + 2*dt.Bytes(ne*h)
	b.op(i).Flops = 6 * float64(ne*h)
	return alpha
}
