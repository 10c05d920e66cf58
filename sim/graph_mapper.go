package sim

import (
	"fmt"
	"math"
)

// GraphTransformer is anemoi's graph-transformer mapper: the encoder
// (GraphTransformerForwardMapper, grid -> mesh) or the decoder
// (GraphTransformerBackwardMapper, mesh -> grid) with its
// GraphTransformerMapperBlock, lowered as anemoi-models 0.6.0 to 0.8.1
// allocate (layers/mapper.py, layers/block.py, layers/conv.py and
// distributed/khop_edges.py @models-0.8.1; anemoi.md section 2.2).
//
// The edge chunking of those versions splits the destination nodes into
// chunks and runs the message passing per chunk of their incoming edges,
// but every chunk's PyG scatter returns a NEW tensor over ALL destination
// rows, added into an fp32 accumulator of the same size: chunking shrinks
// the per-edge tensors and never the per-node ones.
//
// With Checkpoint the whole mapper runs under one activation checkpoint
// (AnemoiModelEncProcDec._run_mapper, non-reentrant): the forward keeps
// only its inputs and the backward re-runs all of it, bringing its whole
// saved set back at once.
type GraphTransformer struct {
	Name               string
	Edges              *EdgeSet
	Channels           int64
	Heads              int64
	MLPRatio           int64
	EdgeAttrs          int64 // edge_dim: fixed + trainable columns (edge_length 1 + edge_dirs 2 + trainable 8 = 11)
	TrainableEdgeAttrs int64 // trainable columns per edge (trainable_parameters.data2hidden / hidden2data: 8)
	Chunks             int64 // edge chunks in training (model.encoder/decoder.num_chunks)
	EvalChunks         int64 // edge chunks in eval (ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER, default 1)
	Checkpoint         bool

	// Set by NewEncoderProcessorDecoder.
	Role  string // "" (a bare block), "encoder" or "decoder"
	SrcIn int64  // encoder: source features embedded by emb_nodes_src
	DstIn int64  // destination features embedded by emb_nodes_dst
	Out   int64  // decoder: output variables of node_data_extractor
}

func (g *GraphTransformer) Kind() string { return "graph_transformer" }

// Label is the user's name, else the role given by encoder_processor_decoder.
func (g *GraphTransformer) Label() string {
	if g.Name != "" {
		return g.Name
	}
	return g.Role
}
func (g *GraphTransformer) Children() []Layer { return nil }

// blockParams counts GraphTransformerMapperBlock: lin_key, lin_query,
// lin_value, lin_self (C x C with bias), lin_edge (edge_dim x C with bias),
// projection (C x C with bias), three layer norms (weight and bias) and
// node_dst_mlp (C -> ratio*C -> C with biases).
func (g *GraphTransformer) blockParams() int64 {
	c, h := g.Channels, g.MLPRatio*g.Channels
	return 4*(c*c+c) + g.EdgeAttrs*c + c + c*c + c + 3*2*c + c*h + h + h*c + c
}

// Params counts the block, the trainable edge attributes (edges x
// trainable columns) and, once configured as an encoder or decoder, the
// node embeddings (emb_nodes_src, emb_nodes_dst) and the decoder's
// node_data_extractor (LayerNorm(C), Linear(C, outputs)).
func (g *GraphTransformer) Params() int64 {
	if g.Edges == nil {
		return 0
	}
	c := g.Channels
	n := g.blockParams() + g.Edges.Count*g.TrainableEdgeAttrs
	switch g.Role {
	case "encoder":
		n += g.SrcIn*c + c + g.DstIn*c + c
	case "decoder":
		n += g.DstIn*c + c + 2*c + c*g.Out + g.Out
	}
	return n
}

func (g *GraphTransformer) Summary() string {
	if g.Edges == nil {
		return "no edges"
	}
	s := fmt.Sprintf("%s -> %s, %d edges, %d channels, %d heads, chunks %d (eval %d)",
		g.Edges.Src.Name, g.Edges.Dst.Name, g.Edges.Count, g.Channels, g.Heads, g.Chunks, g.EvalChunks)
	if g.Checkpoint {
		s += ", checkpointed"
	}
	return s
}

func (g *GraphTransformer) validate(path string) error {
	if g.Edges == nil {
		return errorf(path, "graph_transformer needs edges (knn_edges, radius_edges, ...)")
	}
	for _, f := range []struct {
		what string
		n    int64
	}{{"channels", g.Channels}, {"heads", g.Heads}, {"mlp_ratio", g.MLPRatio}, {"edge_attrs", g.EdgeAttrs}} {
		if err := positive(path, f.what, f.n); err != nil {
			return err
		}
	}
	if g.Channels%g.Heads != 0 {
		return &Error{Path: path, Msg: fmt.Sprintf("heads must divide channels (channels=%d, heads=%d)", g.Channels, g.Heads)}
	}
	if g.TrainableEdgeAttrs < 0 || g.TrainableEdgeAttrs > g.EdgeAttrs {
		return errorf(path, "trainable_edge_attrs must be in [0, edge_attrs=%d] (got %d)", g.EdgeAttrs, g.TrainableEdgeAttrs)
	}
	dst := g.Edges.Dst.Nodes
	for _, f := range []struct {
		what string
		n    int64
	}{{"chunks", g.Chunks}, {"eval_chunks", g.EvalChunks}} {
		if f.n < 1 || f.n > dst {
			return &Error{Path: path, Msg: fmt.Sprintf("%s must be in [1, %d], the destination nodes it splits (got %d)", f.what, dst, f.n)}
		}
	}
	return nil
}

// lower: a mapper reads two node sets, so it lowers only inside
// encoder_processor_decoder.
func (g *GraphTransformer) lower(b *builder, x Value) Value {
	panic(lowerError{&Error{Path: b.name(g.Name), Msg: "graph_transformer maps one node set onto another, so it runs only as the encoder or decoder of encoder_processor_decoder",
		Hint: "encoder_processor_decoder(name, grid, mesh, encoder, processor, decoder, inputs, outputs)"}})
}

// lowerMapper lowers GraphTransformerBaseMapper.forward (mapper.py@models-0.8.1
// l.287-305) for src features xs and dst features xd of batch samples (the
// batch already holds the stacked members): edge attributes and index,
// pre_process (embeddings), the block, post_process (the decoder's
// node_data_extractor).
func (g *GraphTransformer) lowerMapper(b *builder, xs, xd Value, batch int64) Value {
	name := g.Name
	if name == "" {
		name = g.Role
	}
	defer b.scope(name)()
	if g.Checkpoint {
		defer b.beginRegion("")()
	}
	c := g.Channels
	k := g.Chunks
	if b.eval {
		k = g.EvalChunks // block.py@models-0.8.1 l.724: self.num_chunks if self.training else NUM_CHUNKS_INFERENCE_MAPPER
	}
	e := g.Edges.Count * batch
	ea := g.edgeAttributes(b, e)
	// _expand_edges: torch.cat([edge_index + i * edge_inc for i in range(batch)], dim=1);
	// the shifted copies live in the list until the cat.
	ei := b.ew("cat", "edge_index", nil, []int64{2, e}, INT64, fmt.Sprintf("edge index of the %d stacked samples (_expand_edges)", batch))
	b.val(ei).grad = false
	if batch > 1 {
		b.op(b.val(ei).producer).workF = INT64.Bytes(2 * e)
	}
	if g.Role == "encoder" {
		xs = b.linear("emb_nodes_src", "embed", xs, g.SrcIn, c, true)
	}
	xd = b.linear("emb_nodes_dst", "embed", xd, g.DstIn, c, true)
	out := g.block(b, xs, xd, ea, ei, k, e)
	if g.Role == "decoder" {
		done := b.scope("node_data_extractor")
		out = b.layerNorm("0", out, c, true)
		out = b.linear("1", "head", out, c, g.Out, true)
		done()
	}
	// Locals of the mapper's forward until it returns.
	b.keepAlive("mapper_locals", ea, ei, xs)
	return out
}

// edgeAttributes lowers TrainableTensor.forward (layers/graph.py@models-0.8.1
// l.38-40): the fixed attribute buffer and the trainable [edges, 8]
// parameter, each repeated over the batch, concatenated: fp32 [E, edge_dim].
func (g *GraphTransformer) edgeAttributes(b *builder, e int64) Value {
	done := b.scope("trainable")
	var params []int32
	if g.TrainableEdgeAttrs > 0 {
		params = append(params, b.param("trainable", []int64{g.Edges.Count, g.TrainableEdgeAttrs}, "edge_attr"))
	}
	i := b.addOp("cat", "edge_attr", nil, params...)
	y := b.out(i, "edge_attr", []int64{e, g.EdgeAttrs}, FP32, "edge attributes repeated over the batch, fixed + trainable (TrainableTensor)")
	b.op(i).workF = FP32.Bytes(e * g.EdgeAttrs) // the two repeats, alive until the cat
	done()
	return y
}

// block lowers GraphTransformerMapperBlock.forward (block.py@models-0.8.1
// l.696-755) with k edge chunks over e edges.
func (g *GraphTransformer) block(b *builder, xs, xd, ea, ei Value, k, e int64) Value {
	defer b.scope("proc")()
	c := g.Channels
	r := rows(b.shape(xd))
	// x = (layer_norm_attention_src(x[0]), layer_norm_attention_dest(x[1])):
	// fp32 under autocast, alive in the local x until the block returns.
	lnS := b.layerNorm("layer_norm_attention_src", xs, c, true)
	lnD := b.layerNorm("layer_norm_attention", xd, c, true)
	xr := b.linear("lin_self", "self", lnD, c, c, true)
	// get_qkve; shard_qkve_heads is views on one GPU.
	q := b.linear("lin_query", "q", lnD, c, c, true)
	key := b.linear("lin_key", "k", lnS, c, c, true)
	val := b.linear("lin_value", "v", lnS, c, c, true)
	edges := b.linear("lin_edge", "edge", ea, g.EdgeAttrs, c, true)
	// attention_block
	var att Value
	if k > 1 {
		att = g.chunkedAttention(b, q, key, val, edges, ei, r, e, k)
	} else {
		att = g.conv(b, "conv", q, key, val, edges, ei, r, e)
	}
	// out = torch.cat([self.projection(chunk) for chunk in torch.tensor_split(out + x_r, num_chunks)])
	sum := b.ew("add", "out_plus_x_r", []Value{att, xr}, []int64{r, c}, promote(b.dtype(att), b.dtype(xr)),
		"out + x_r over all destination rows (fp32: the accumulator is fp32)")
	cdt := b.dtype(xr)
	proj := b.newChunkLinear("projection", "o", c, c, true)
	var parts []Value
	for i, n := range splitRows(r, k) {
		done := b.scope(chunkScope(int64(i), k))
		ci := b.castRows(sum, n, cdt, "autocast copy of a tensor_split chunk of out + x_r (projection input)")
		parts = append(parts, b.applyLinear(proj, ci))
		done()
	}
	b.keepAlive("split_out_plus_x_r", sum)
	out := b.catRows("projection_cat", parts, "projections of the chunks, concatenated")
	b.keepAlive("accumulator", att) // the old `out` until the cat is assigned
	// out = out + x_skip[1]
	out = b.ew("add", "out_plus_x_skip", []Value{out, xd}, []int64{r, c}, promote(b.dtype(out), b.dtype(xd)), "out + x_skip[1]")
	// nodes_new_dst = torch.cat([self.run_node_dst_mlp(chunk) + chunk for chunk in out.tensor_split(num_chunks)])
	ln := b.newChunkNorm("layer_norm_mlp_dst", c)
	hidden := g.MLPRatio * c
	fc1 := b.newChunkLinear("node_dst_mlp.0", "up", c, hidden, true)
	fc2 := b.newChunkLinear("node_dst_mlp.2", "down", hidden, c, true)
	parts = parts[:0:0]
	for i, n := range splitRows(r, k) {
		done := b.scope(chunkScope(int64(i), k))
		ci := out
		if k > 1 {
			ci = b.viewRows(out, n, "tensor_split chunk of out (node MLP input)")
		}
		h := b.applyNorm(ln, ci)
		h = b.applyLinear(fc1, h)
		h = b.activation("gelu", h)
		h = b.applyLinear(fc2, h)
		parts = append(parts, b.ew("add", "residual", []Value{h, out}, []int64{n, c}, promote(b.dtype(h), b.dtype(out)),
			"run_node_dst_mlp(chunk) + chunk"))
		done()
	}
	nodes := b.catRows("nodes_new_dst", parts, "node MLP outputs of the chunks, concatenated")
	// Locals of the block's forward until it returns (x, x_r, query, key,
	// value, edges, out, and x_skip holding the inputs).
	b.keepAlive("block_locals", lnS, lnD, xr, q, key, val, edges, out, xs)
	return nodes
}

// catRows is torch.cat of row chunks (one chunk: no copy). Its backward
// hands each chunk a view of the gradient.
func (b *builder) catRows(name string, parts []Value, why string) Value {
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

// chunkedAttention lowers attention_block with num_chunks > 1:
// sort_edges_1hop_chunks copies each chunk's edges (bipartite_subgraph,
// khop_edges.py@models-0.8.1 l.90-132), then an fp32 accumulator over all
// destination rows (torch.zeros with no dtype) receives every chunk's
// message passing (out += self.conv(...)).
func (g *GraphTransformer) chunkedAttention(b *builder, q, key, val, edges, ei Value, r, e, k int64) Value {
	c := g.Channels
	src := rows(b.shape(key))
	counts := chunkEdges(e, r, k)
	var attrs, idx []Value
	done := b.scope("sort_edges")
	for i, n := range counts {
		op := b.addOp("index", chunkScope(int64(i), k), []Value{edges, ei})
		a := b.out(op, chunkScope(int64(i), k)+".edge_attr", []int64{n, c}, b.dtype(edges), "edge features of one chunk (bipartite_subgraph copy)")
		x := b.out(op, chunkScope(int64(i), k)+".edge_index", []int64{2, n}, INT64, "edge index of one chunk (bipartite_subgraph copy)")
		b.val(x).grad = false
		b.op(op).workF = src + r + e // bool node and edge masks
		// IndexBackward: zeros_like(edges).index_put_(mask, grad), a full-size tensor per chunk.
		b.op(op).workB = b.val(edges).bytes
		attrs, idx = append(attrs, a), append(idx, x)
	}
	done()
	acc := b.ew("zeros", "out", nil, []int64{r, c}, FP32,
		fmt.Sprintf("fp32 accumulator torch.zeros([%d, %d, %d]) over all destination rows (no dtype: fp32)", r, g.Heads, c/g.Heads))
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
func (g *GraphTransformer) conv(b *builder, name string, q, key, val, attr, idx Value, r, ne int64) Value {
	defer b.scope(name)()
	c, h := g.Channels, g.Heads
	qi := b.gatherRows("query_i", q, idx, ne)
	kj := b.gatherRows("key_j", key, idx, ne)
	vj := b.gatherRows("value_j", val, idx, ne)
	// message: key_j = key_j + edge_attr; alpha = (query_i * key_j).sum(-1) / sqrt(d)
	ke := b.add("key_j_plus_edge", kj, attr)
	prod := b.mul("query_key", qi, ke)
	if b.prec.Autocast {
		prod = b.cast(prod, FP32, "autocast fp32 copy of query_i * key_j (sum is on the fp32 list)")
	}
	score := b.ew("sum", "alpha_raw", []Value{prod}, []int64{ne, h}, b.dtype(prod), "attention scores per edge and head")
	alpha := b.edgeSoftmax(score, idx, r, ne, h)
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
	b.op(i).flops = float64(ne * c)
	b.keepAlive("collected", qi, kj, vj)
	return s
}

// gatherRows is PyG's collect of x_i / x_j: src.index_select(0, index)
// ([edges, H, d]). It saves the index; its backward builds a zero tensor
// of src's size per call and index_adds into it.
func (b *builder) gatherRows(name string, src, idx Value, ne int64) Value {
	i := b.addOp("index_select", name, []Value{src, idx})
	y := b.out(i, name, []int64{ne, b.last(src)}, b.dtype(src), name+" gathered per edge (index_select)")
	b.save(i, idx)
	b.op(i).workB = b.val(src).bytes
	b.op(i).flops = float64(ne * b.last(src))
	return y
}

// edgeSoftmax lowers torch_geometric.utils.softmax over the edges of each
// destination node: a detached scatter-max and a scatter-sum over all r
// destination rows ([r, heads] each), exp (saves its result) and the
// division (saves the gathered denominator).
func (b *builder) edgeSoftmax(score, idx Value, r, ne, h int64) Value {
	dt := b.dtype(score)
	i := b.addOp("softmax", "softmax", []Value{score, idx})
	ex := b.out(i, "exp", []int64{ne, h}, dt, "exp of the shifted scores (saved)")
	den := b.out(i, "denominator", []int64{ne, h}, dt, "softmax denominator gathered per edge (saved)")
	alpha := b.out(i, "alpha", []int64{ne, h}, dt, "attention weights per edge and head")
	b.val(ex).grad, b.val(den).grad = false, false
	b.save(i, ex, den)
	b.op(i).workF = 2*dt.Bytes(r*h) + 2*dt.Bytes(ne*h)
	b.op(i).flops = 6 * float64(ne*h)
	return alpha
}
