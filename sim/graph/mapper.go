package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
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
	CPUOffload         bool    // refused: anemoi's mappers cannot offload (Validate)
	Version            Version // the anemoi-models release replayed (set by NewEncoderProcessorDecoder)
	Backend            string  // graph_attention_backend: "pyg", "triton", "" for the release's default

	// Set by NewEncoderProcessorDecoder.
	Role             string // "" (a bare block), "encoder" or "decoder"
	KeepBatchSharded bool   // the model's keep_batch_sharded (mapper_partitioned.go)
	SrcIn            int64  // encoder: source features embedded by emb_nodes_src
	DstIn            int64  // destination features embedded by emb_nodes_dst
	Out              int64  // decoder: output variables of node_data_extractor
}

func (g *GraphTransformer) Kind() string { return "graph_transformer" }

// Label is the user's name, else the role given by encoder_processor_decoder.
func (g *GraphTransformer) Label() string {
	if g.Name != "" {
		return g.Name
	}
	return g.Role
}
func (g *GraphTransformer) Children() []core.Layer { return nil }

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

func (g *GraphTransformer) Validate(path string) error {
	if g.Edges == nil {
		return units.Errorf(path, "graph_transformer needs edges (knn_edges, radius_edges, ...)")
	}
	if err := checkBackendName(path, g.Backend); err != nil {
		return err
	}
	for _, f := range []struct {
		what string
		n    int64
	}{{"channels", g.Channels}, {"heads", g.Heads}, {"mlp_ratio", g.MLPRatio}, {"edge_attrs", g.EdgeAttrs}} {
		if err := core.Positive(path, f.what, f.n); err != nil {
			return err
		}
	}
	if g.Channels%g.Heads != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("heads must divide channels (channels=%d, heads=%d)", g.Channels, g.Heads)}
	}
	if g.TrainableEdgeAttrs < 0 || g.TrainableEdgeAttrs > g.EdgeAttrs {
		return units.Errorf(path, "trainable_edge_attrs must be in [0, edge_attrs=%d] (got %d)", g.EdgeAttrs, g.TrainableEdgeAttrs)
	}
	if g.CPUOffload {
		return ErrMapperOffload(path)
	}
	dst := g.Edges.Dst.Nodes
	for _, f := range []struct {
		what string
		n    int64
	}{{"chunks", g.Chunks}, {"eval_chunks", g.EvalChunks}} {
		if f.n < 1 || f.n > dst {
			return &units.Error{Path: path, Msg: fmt.Sprintf("%s must be in [1, %d], the destination nodes it splits (got %d)", f.what, dst, f.n)}
		}
	}
	return nil
}

// ErrMapperOffload is why a mapper cannot take cpu_offload: anemoi's
// BaseMapper.offload_layers wraps each module of self.proc in
// offload_wrapper, but in models-0.8.1 BaseMapper.__init__ calls it while
// self.proc is still NotImplemented (layers/mapper.py l.65-71), and where
// it is called after the block is built (l.273, and every mapper in
// models-0.18.0 c3c7a893, l.237) self.proc is one block, not a list: the
// model fails to build with a TypeError.
func ErrMapperOffload(path string) error {
	return &units.Error{Path: path, Msg: "cpu_offload is broken for anemoi's encoder and decoder: BaseMapper.offload_layers iterates self.proc, " +
		"which is NotImplemented when models-0.8.1's BaseMapper.__init__ calls it and a single block afterwards (mapper.py l.65-71, l.273; " +
		"the same in models-0.18.0): building the model raises a TypeError",
		Hint: "offload the processor instead: graph_transformer_processor(..., cpu_offload=True) (model.processor.cpu_offload)"}
}

// lower: a mapper reads two node sets, so it lowers only inside
// encoder_processor_decoder.
func (g *GraphTransformer) Lower(b *core.Builder, x core.Value) core.Value {
	panic(core.LowerError{Err: &units.Error{Path: b.Name(g.Name), Msg: "graph_transformer maps one node set onto another, so it runs only as the encoder or decoder of encoder_processor_decoder",
		Hint: "encoder_processor_decoder(name, grid, mesh, encoder, processor, decoder, inputs, outputs)"}})
}

// lowerMapper lowers GraphTransformerBaseMapper.forward (mapper.py@models-0.8.1
// l.287-305) for src features xs and dst features xd of batch samples (the
// batch already holds the stacked members): edge attributes and index,
// pre_process (embeddings), the block, post_process (the decoder's
// node_data_extractor).
func (g *GraphTransformer) lowerMapper(b *core.Builder, xs, xd core.Value, batch int64) core.Value {
	name := g.Name
	if name == "" {
		name = g.Role
	}
	defer b.Scope(name)()
	if g.Version.Partitioned() {
		defer wrap(b, name, g.Kind())() // its chunks' checkpoints nest in it
		return g.lowerPartitioned(b, xs, xd, batch)
	}
	if g.chunkedMapper() {
		defer wrap(b, name, g.Kind())() // its chunks' checkpoints nest in it
		return g.lowerChunked(b, xs, xd, batch)
	}
	if g.Checkpoint {
		defer b.BeginRegion("")()
	}
	defer wrap(b, name, g.Kind())() // checkpoint(modules=["decoder"]): nested in _run_mapper's (wrap.go)
	c := g.Channels
	k := g.Chunks
	if b.Eval {
		k = g.EvalChunks // block.py@models-0.8.1 l.724: self.num_chunks if self.training else NUM_CHUNKS_INFERENCE_MAPPER
	}
	ea, ei, e := g.edges().lower(b, batch)
	// Model sharding (shard.go): this rank's rows of the nodes and edges;
	// the decoder's source rows come sharded from the processor.
	if g.Role == "encoder" {
		xs = shardRows(b, xs, "this rank's source rows (pre_process shard_tensor)")
	}
	xd = shardRows(b, xd, "this rank's destination rows (pre_process shard_tensor)")
	ea = shardRows(b, ea, "this rank's edge attributes (shard_tensor)")
	if g.Role == "encoder" {
		xs = b.Linear("emb_nodes_src", core.RoleEmbed, xs, g.SrcIn, c, true)
	}
	xd = b.Linear("emb_nodes_dst", core.RoleEmbed, xd, g.DstIn, c, true)
	out := g.block(b, xs, xd, ea, ei, k, e, batch*g.Edges.Dst.Nodes, batch*g.Edges.Src.Nodes, true)
	if g.Role == "decoder" {
		done := b.Scope("node_data_extractor")
		out = b.LayerNorm("0", out, c, true)
		out = b.Linear("1", "head", out, c, g.Out, true)
		done()
	}
	// Locals of the mapper's forward until it returns.
	b.KeepAlive("mapper_locals", ea, ei, xs)
	return out
}

// edges are the mapper's edges as its forward uses them.
func (g *GraphTransformer) edges() edgeInputs {
	return edgeInputs{set: g.Edges, attrs: g.EdgeAttrs, trainable: g.TrainableEdgeAttrs, sorted: g.Version.Partitioned()}
}

// block lowers GraphTransformerMapperBlock.forward (block.py@models-0.8.1
// l.696-755) with k edge chunks over e edges, of rAll destination and
// sAll source rows (this rank's are xd's and xs's under model sharding).
// With heads (0.8.1's model sharding, shard.go) query, key, value and the
// edges are exchanged for all rows and a G-th of the heads; the edge
// sharding of later releases runs the block on this GPU's rows as they
// are (mapper_partitioned.go).
func (g *GraphTransformer) block(b *core.Builder, xs, xd, ea, ei core.Value, k, e, rAll, sAll int64, heads bool) core.Value {
	defer b.Scope("proc")()
	defer wrap(b, g.Label()+".proc")()
	c := g.Channels
	r := core.Rows(b.Shape(xd))
	// x = (layer_norm_attention_src(x[0]), layer_norm_attention_dest(x[1])):
	// fp32 under autocast, alive in the local x until the block returns.
	lnS := b.LayerNorm("layer_norm_attention_src", xs, c, true)
	lnD := b.LayerNorm("layer_norm_attention", xd, c, true)
	xr := b.Linear("lin_self", "self", lnD, c, c, true)
	// get_qkve; shard_qkve_heads is views on one GPU.
	q := b.Linear("lin_query", core.RoleQ, lnD, c, c, true)
	key := b.Linear("lin_key", core.RoleK, lnS, c, c, true)
	val := b.Linear("lin_value", core.RoleV, lnS, c, c, true)
	edges := b.Linear("lin_edge", "edge", ea, g.EdgeAttrs, c, true)
	conv := g.attn()
	if heads {
		q, key, val, edges = shardQKVE(b, q, key, val, edges, rAll, sAll, e)
		conv = shardedAttention(b, g.Channels, g.Heads, resolveBackend(g.Backend, g.Version))
	}
	conv.wrapped = wraps(b, g.Label()+".proc.conv")
	att := conv.block(b, q, key, val, edges, ei, rAll, e, k)
	if heads {
		att = rowsToAllHeads(b, "attention_out", att, rAll)
	}
	out := projectChunks(b, att, xr, r, c, k)
	// out = out + x_skip[1]
	out = b.Ew("add", "out_plus_x_skip", []core.Value{out, xd}, []int64{r, c}, core.Promote(b.Dtype(out), b.Dtype(xd)), "out + x_skip[1]")
	// nodes_new_dst = torch.cat([self.run_node_dst_mlp(chunk) + chunk for chunk in out.tensor_split(num_chunks)])
	ln := newChunkNorm(b, "layer_norm_mlp_dst", c)
	hidden := g.MLPRatio * c
	fc1 := newChunkLinear(b, "node_dst_mlp.0", core.RoleUp, c, hidden, true)
	fc2 := newChunkLinear(b, "node_dst_mlp.2", core.RoleDown, hidden, c, true)
	var parts []core.Value
	for i, n := range splitRows(r, k) {
		done := b.Scope(chunkScope(int64(i), k))
		ci := out
		if k > 1 {
			ci = viewRows(b, out, n, "tensor_split chunk of out (node MLP input)")
		}
		h := applyNorm(b, ln, ci)
		h = applyLinear(b, fc1, h)
		h = nn.Activation(b, "gelu", h)
		h = applyLinear(b, fc2, h)
		parts = append(parts, b.Ew("add", "residual", []core.Value{h, out}, []int64{n, c}, core.Promote(b.Dtype(h), b.Dtype(out)),
			"run_node_dst_mlp(chunk) + chunk"))
		done()
	}
	nodes := catRows(b, "nodes_new_dst", parts, "node MLP outputs of the chunks, concatenated")
	// Locals of the block's forward until it returns (x, x_r, query, key,
	// value, edges, out, and x_skip holding the inputs).
	b.KeepAlive("block_locals", lnS, lnD, xr, q, key, val, edges, out, xs)
	return nodes
}

// attn is the block's message passing (conv.go).
func (g *GraphTransformer) attn() edgeAttention {
	return edgeAttention{channels: g.Channels, heads: g.Heads, backend: resolveBackend(g.Backend, g.Version)}
}
