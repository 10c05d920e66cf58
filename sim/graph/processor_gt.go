package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// GraphTransformerProcessor is anemoi's GraphTransformerProcessor
// (layers/processor.py, layers/chunk.py GraphTransformerProcessorChunk,
// layers/block.py GraphTransformerProcessorBlock @models-0.8.1): Layers
// graph-transformer blocks over the mesh's own edges (multi-scale edges),
// the processor of anemoi's graphtransformer_ens.yaml and so of MET
// Norway's Bris. Each block runs, on one node set:
//
//	x_skip = x; x = layer_norm_attention(x)   (conditional with noise)
//	x_r = lin_self(x); q, k, v = lin_query/key/value(x); edges = lin_edge(edge_attr)
//	q, k = q_norm(q), k_norm(k)               (qk_norm, per head)
//	out = attention_block(q, k, v, edges)     (GraphTransformerConv, conv.go)
//	out = projection(out + x_r) + x_skip
//	x = node_dst_mlp(layer_norm_mlp_dst(out)) + out
//
// so every layer projects the edge attributes and keeps per-edge tensors
// for backward, on top of what a TransformerProcessor layer keeps.
//
// The processor builds the batch's edge attributes and index once
// (edge_inputs.go) and hands them to every checkpoint segment: Segments
// is num_chunks, the number of ProcessorChunks, each under one activation
// checkpoint (BaseProcessor.run_layers). The blocks split their edges
// into chunks only in eval: num_chunks=1 in training (chunk.py l.260),
// NUM_CHUNKS_INFERENCE_PROCESSOR (ANEMOI_INFERENCE_NUM_CHUNKS_PROCESSOR,
// else ANEMOI_INFERENCE_NUM_CHUNKS, default 1) in eval: EvalChunks.
type GraphTransformerProcessor struct {
	Name               string
	Edges              *EdgeSet // mesh -> mesh
	Layers             int64
	Channels           int64
	Heads              int64
	MLPRatio           int64
	EdgeAttrs          int64 // edge_dim: fixed + trainable columns
	TrainableEdgeAttrs int64 // trainable_parameters.hidden2hidden
	Segments           int64 // checkpoint segments (processor num_chunks)
	EvalChunks         int64 // edge chunks per block in eval
	QKNorm             bool
	Cond               int64   // noise channels conditioning the layer norms (set by NewEncoderProcessorDecoder)
	CPUOffload         bool    // cpu_offload: the segments' saved tensors in pinned host memory (runSegments)
	Backend            string  // graph_attention_backend: "pyg", "triton", "" for the release's default
	Version            Version // the anemoi-models release replayed (set by NewEncoderProcessorDecoder)
	inModel            bool    // the processor of an encoder_processor_decoder (Conditioned)
}

func (p *GraphTransformerProcessor) Kind() string           { return "graph_transformer_processor" }
func (p *GraphTransformerProcessor) Label() string          { return p.Name }
func (p *GraphTransformerProcessor) Children() []core.Layer { return nil }

func (p *GraphTransformerProcessor) mesh() *NodeSet {
	if p.Edges == nil {
		return nil
	}
	return p.Edges.Dst
}

func (p *GraphTransformerProcessor) channels() int64 { return p.Channels }

func (p *GraphTransformerProcessor) Conditioned(cond int64) MeshProcessor {
	c := *p
	c.Cond, c.Name, c.inModel = cond, processorName(p.Name), true
	return &c
}

// layerParams counts one GraphTransformerProcessorBlock: lin_key,
// lin_query, lin_value, lin_self (C x C with bias), lin_edge (edge_dim x
// C with bias), projection (C x C with bias), q_norm and k_norm (head_dim
// weights, bias=False), two layer norms (or ConditionalLayerNorms: scale
// and bias Linear(cond, C)), node_dst_mlp (C -> ratio*C -> C with biases).
func (p *GraphTransformerProcessor) layerParams() int64 {
	c, h := p.Channels, p.MLPRatio*p.Channels
	n := 4*(c*c+c) + p.EdgeAttrs*c + c + c*c + c
	if p.QKNorm && p.Heads > 0 {
		n += 2 * (c / p.Heads)
	}
	if p.Cond > 0 {
		n += 2 * 2 * (p.Cond*c + c)
	} else {
		n += 2 * 2 * c
	}
	return n + c*h + h + h*c + c
}

// Params counts the blocks and the trainable edge attributes.
func (p *GraphTransformerProcessor) Params() int64 {
	if p.Edges == nil {
		return 0
	}
	return p.Layers*p.layerParams() + p.Edges.Count*p.TrainableEdgeAttrs
}

func (p *GraphTransformerProcessor) Summary() string {
	if p.Edges == nil {
		return "no edges"
	}
	return fmt.Sprintf("%d layers over %s, %d edges, %d channels, %d heads, %d checkpoint segments (eval chunks %d)%s",
		p.Layers, p.Edges.Dst.Name, p.Edges.Count, p.Channels, p.Heads, p.Segments, p.EvalChunks, offloadSummary(p.CPUOffload))
}

func (p *GraphTransformerProcessor) Validate(path string) error {
	if p.Edges == nil {
		return units.Errorf(path, "graph_transformer_processor needs the mesh's edges (multiscale_edges)")
	}
	if err := checkBackendName(path, p.Backend); err != nil {
		return err
	}
	if p.Edges.Src.Kind != "mesh" || !sameNodes(p.Edges.Src, p.Edges.Dst) {
		return &units.Error{Path: path, Msg: fmt.Sprintf("edges must connect a mesh's nodes to each other (got %s)", p.Edges),
			Hint: "multiscale_edges(mesh)"}
	}
	if err := validateBlocks(path, p.Layers, p.Channels, p.Heads, p.MLPRatio, p.Segments); err != nil {
		return err
	}
	if err := core.Positive(path, "edge_attrs", p.EdgeAttrs); err != nil {
		return err
	}
	if p.TrainableEdgeAttrs < 0 || p.TrainableEdgeAttrs > p.EdgeAttrs {
		return units.Errorf(path, "trainable_edge_attrs must be in [0, edge_attrs=%d] (got %d)", p.EdgeAttrs, p.TrainableEdgeAttrs)
	}
	if n := p.Edges.Dst.Nodes; p.EvalChunks < 1 || p.EvalChunks > n {
		return &units.Error{Path: path, Msg: fmt.Sprintf("eval_chunks must be in [1, %d], the nodes it splits (got %d)", n, p.EvalChunks)}
	}
	return nil
}

// lower runs the processor on its own (no noise conditioning).
func (p *GraphTransformerProcessor) Lower(b *core.Builder, x core.Value) core.Value {
	return p.lowerCond(b, x, core.NoValue)
}

func (p *GraphTransformerProcessor) lowerCond(b *core.Builder, x, cond core.Value) core.Value {
	if b.Last(x) != p.Channels {
		panic(core.ShapeMismatch(b, "graph_transformer_processor", p.Channels, b.Last(x)))
	}
	defer b.Scope(processorName(p.Name))()
	// In a graph model, checkpoint(modules=["processor"]) wraps it (wrap.go);
	// a bare processor is wrapped by the model's own layer policy.
	wrapped := p.inModel && wraps(b, processorName(p.Name), p.Kind())
	if wrapped {
		defer b.BeginNestedRegion("")()
	}
	nodes := p.Edges.Dst.Nodes
	r := core.Rows(b.Shape(x))
	rAll := r // all mesh rows of the batch; this rank's are x's
	if g := shards(b); g > 1 {
		rAll = nodes // one sample per GPU under model sharding (shard.go)
		if r != localRows(nodes, g) {
			panic(core.LowerError{Err: units.Errorf(b.Name(""), "processor rows (%d) are not this rank's share of the %d mesh nodes", r, nodes)})
		}
	}
	if rAll%nodes != 0 {
		panic(core.LowerError{Err: units.Errorf(b.Name(""), "processor rows (%d) are not a multiple of the %d mesh nodes", r, nodes)})
	}
	if !core.ProductFits(rAll/nodes, p.Edges.Count, p.Channels, 8) {
		panic(core.LowerError{Err: units.Errorf(b.Name(""), "a batch of %d samples makes tensors too large to count in bytes (%d edges x %d channels)", rAll/nodes, p.Edges.Count, p.Channels)})
	}
	in := edgeInputs{set: p.Edges, attrs: p.EdgeAttrs, trainable: p.TrainableEdgeAttrs, sorted: p.Version.Partitioned()}
	endEdges := func() {}
	if p.Version.Partitioned() { // get_edges under its own checkpoint (mapper_partitioned.go)
		endEdges = b.BeginNestedRegion("")
	}
	ea, ei, e := in.lower(b, rAll/nodes) // once, outside the segments' checkpoints
	eaAll := core.NoValue                // the provider's attributes, whose storage this GPU's view keeps (edge sharding)
	var halo int64 = -1                  // no halo exchange: one GPU, or 0.8.1's head sharding
	if g := shards(b); g > 1 && p.Version.EdgeSharded() {
		// shard_edges.go: this GPU's edges, and the halo every block exchanges.
		eaAll = ea
		ea, ei, e = shardEdges(b, ea, ei, e, nodes, g)
		halo = haloNodes(nodes, g)
	} else {
		ea = shardRows(b, ea, "this rank's edge attributes (shard_tensor)")
	}
	endEdges()
	k := int64(1)
	if b.Eval {
		k = p.EvalChunks
	}
	x = runSegments(b, x, p.Layers, p.Segments, p.CPUOffload, wrapped, func(x core.Value) core.Value { return p.block(b, x, ea, ei, cond, k, e, rAll, halo) })
	b.KeepAlive("processor_locals", eaAll, ea, ei) // edge_attr and edge_index until forward returns
	return x
}

// block lowers GraphTransformerProcessorBlock.forward (block.py@models-0.8.1
// l.816-849) over rAll rows (this rank's are x's) and e edges in k edge
// chunks. With halo >= 0 it is the edge sharding of 0.17.0 and later
// (block.py@models-0.18.0 l.1148-1183, shard_edges.go): key and value
// over this GPU's rows and the halo exchanged from the other GPUs, query
// and the message passing over this GPU's rows and edges; the block
// caches its halo index on the device (edge_index_local [2, e] int64 and
// about halo send indices). Otherwise 0.8.1's head sharding (shard.go).
func (p *GraphTransformerProcessor) block(b *core.Builder, x, ea, ei, cond core.Value, k, e, rAll, halo int64) core.Value {
	c := p.Channels
	r := core.Rows(b.Shape(x))
	h := condNorm(b, "layer_norm_attention", x, cond, c, p.Cond)
	xr := b.Linear("lin_self", "self", h, c, c, true)
	src := h // key and value read these rows
	if halo >= 0 {
		b.Buffer("halo_info.edge_index_local", []int64{2, e}, units.INT64, "the block's cached halo index: this GPU's edges relabelled to its rows and the halo (build_halo_info)")
		b.Buffer("halo_info.send_indices", []int64{halo}, units.INT64, "the block's cached rows to send to the other GPUs (build_halo_info; about the halo: the graph is symmetric)")
		src = haloExchange(b, h, halo)
	}
	q := b.Linear("lin_query", core.RoleQ, h, c, c, true)
	key := b.Linear("lin_key", core.RoleK, src, c, c, true)
	val := b.Linear("lin_value", core.RoleV, src, c, c, true)
	edges := b.Linear("lin_edge", "edge", ea, p.EdgeAttrs, c, true)
	if p.QKNorm {
		q = headNorm(b, "q_norm", q, c/p.Heads)
		key = headNorm(b, "k_norm", key, c/p.Heads)
	}
	var out core.Value
	if halo >= 0 {
		out = p.attn().block(b, q, key, val, edges, ei, r, e, k)
		b.KeepAlive("x_plus_halo", src) // a local of _forward_edges_shard_strategy until the attention returns
	} else {
		q, key, val, edges = shardQKVE(b, q, key, val, edges, rAll, rAll, e)
		out = shardedAttention(b, c, p.Heads, resolveBackend(p.Backend, p.Version)).block(b, q, key, val, edges, ei, rAll, e, k)
		out = rowsToAllHeads(b, "attention_out", out, rAll)
	}
	o := projectChunks(b, out, xr, r, c, k)
	o = b.Ew("add", "out_plus_x_skip", []core.Value{o, x}, []int64{r, c}, core.Promote(b.Dtype(o), b.Dtype(x)), "out + x_skip")
	// nodes_new = self.run_node_dst_mlp(out) + out
	m := condNorm(b, "layer_norm_mlp_dst", o, cond, c, p.Cond)
	done := b.Scope("node_dst_mlp")
	m = b.Linear("0", core.RoleUp, m, c, p.MLPRatio*c, true)
	m = nn.Activation(b, "gelu", m)
	m = b.Linear("2", core.RoleDown, m, p.MLPRatio*c, c, true)
	done()
	y := b.Ew("add", "nodes_new", []core.Value{m, o}, []int64{r, c}, core.Promote(b.Dtype(m), b.Dtype(o)), "run_node_dst_mlp(out) + out")
	// Locals of the block's forward until it returns (x, x_r, query, key,
	// value, edges, out, and x_skip holding the input).
	b.KeepAlive("block_locals", h, xr, q, key, val, edges, o, x)
	return y
}

// attn is the block's message passing on one GPU's rows (conv.go).
func (p *GraphTransformerProcessor) attn() edgeAttention {
	return edgeAttention{channels: p.Channels, heads: p.Heads, backend: resolveBackend(p.Backend, p.Version)}
}
