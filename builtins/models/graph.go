package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"go.starlark.net/starlark"
)

// Graph models (DESIGN.md 2.2): node sets ("grid" and "mesh" values), edge
// sets ("edges" values), the graph_transformer mapper and
// transformer_processor layers, and encoder_processor_decoder, which
// returns a model.

func GraphBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "grid",
			Sig:  "grid(name, points)",
			Doc:  "A set of data points (a weather model's grid): exactly points nodes.",
			Fn:   gridFn,
		},
		{
			Name: "stretched_grid",
			Sig:  "stretched_grid(name, regional_points, global_points)",
			Doc: "A regional high-resolution grid inside a coarser global one (anemoi's stretched grids: a " +
				"limited-area cutout plus the global points outside it): regional_points + global_points nodes.",
			Fn: stretchedGridFn,
		},
		{
			Name: "icosahedral_mesh",
			Sig:  "icosahedral_mesh(name, refinement)",
			Doc: "A hidden mesh of icosphere vertices refined refinement times (anemoi-graphs TriNodes): " +
				"exactly 10*4^refinement + 2 nodes (6: 40,962; 7: 163,842).",
			Fn: icosahedralMeshFn,
		},
		{
			Name: "stretched_mesh",
			Sig:  "stretched_mesh(name, global_refinement, regional_refinement, regional_fraction)",
			Doc: "A hidden mesh refined to regional_refinement inside a region covering regional_fraction of the " +
				"sphere and to global_refinement elsewhere (anemoi-graphs StretchedTriNodes). The node count is an " +
				"estimate, (10*4^g+2)*(1-f) + (10*4^r+2)*f: the icosphere is not equal-area, so the true count " +
				"differs by a few per cent. Use mesh(name, nodes) when the count is known.",
			Fn: stretchedMeshFn,
		},
		{
			Name: "mesh",
			Sig:  "mesh(name, nodes)",
			Doc:  "A hidden mesh with an explicit node count.",
			Fn:   meshFn,
		},
		{
			Name: "knn_edges",
			Sig:  "knn_edges(src, dst, k)",
			Doc: "Edges from each dst node to its k nearest src nodes (anemoi-graphs KNNEdges): exactly k * dst.nodes " +
				"edges. k can be at most src.nodes.",
			Fn: knnEdgesFn,
		},
		{
			Name: "radius_edges",
			Sig:  "radius_edges(src, dst, per_node)",
			Doc: "Edges from each dst node to every src node within a radius (anemoi-graphs CutOffEdges). The count " +
				"depends on the geometry, so it is an estimate: per_node expected neighbours per dst node.",
			Fn: radiusEdgesFn,
		},
		{
			Name: "multiscale_edges",
			Sig:  "multiscale_edges(mesh, per_node=None)",
			Doc: "The processor edges of a refined icosahedral mesh (anemoi-graphs MultiScaleEdges): each level " +
				"1..r adds its icosphere's neighbours. Exact on an icosahedral_mesh, 80*(4^r - 1) directed edges " +
				"(about 8 per node); otherwise per_node (default 8) edges per node, an estimate.",
			Fn: multiscaleEdgesFn,
		},
		{
			Name: "graph_transformer",
			Sig: "graph_transformer(src, dst, edges, channels, heads, mlp_ratio=4, edge_attrs=11, chunks=1, " +
				"eval_chunks=1, checkpoint=True, trainable_edge_attrs=8, cpu_offload=False, attention_backend=None, name=None)",
			Doc: "anemoi's graph-transformer mapper (encoder: grid -> mesh; decoder: mesh -> grid), as anemoi-models " +
				"0.6-0.8.1 allocate it: layer norms in fp32 under autocast, query/key/value/edge projections, edge " +
				"attention in chunks, and per chunk a PyG scatter into a NEW fp32 tensor over ALL destination nodes, " +
				"added to an fp32 accumulator of the same size, so chunking shrinks the per-edge tensors but never " +
				"those. chunks splits the edges in training, eval_chunks in eval (the validation pass; anemoi reads it " +
				"from ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER, default 1). edge_attrs is the edge feature width (length 1 + " +
				"direction 2 + trainable_edge_attrs); the trainable ones are parameters of edges x " +
				"trainable_edge_attrs. checkpoint runs the whole mapper under one activation checkpoint (anemoi's " +
				"_run_mapper): the forward keeps its inputs, the backward re-runs all of it. cpu_offload=True is refused: " +
				"anemoi's mappers fail to build with it (offload_layers iterates a block that is not a list). " + backendDoc + " It runs inside " +
				"encoder_processor_decoder, which adds the node embeddings (and the decoder's output head) to its params.",
			Fn: graphTransformerFn,
		},
		{
			Name: "transformer_processor",
			Sig:  "transformer_processor(mesh, layers, channels, heads, segments=2, window=None, mlp_ratio=4, qk_norm=True, cpu_offload=False, name=None)",
			Doc: "anemoi's TransformerProcessor over the mesh: layers pre-norm transformer blocks with flash attention " +
				"(window: keys within window on each side, None: global), per-head q/k layer norms (qk_norm) and a GELU " +
				"MLP of mlp_ratio * channels. segments is anemoi's processor num_chunks: the layers run in that many " +
				"checkpointed segments, so the backward recomputes layers/segments layers at once. In a model with " +
				"noise its layer norms are conditional on the noise (ConditionalLayerNorm, left in fp32). " + offloadDoc,
			Fn: transformerProcessorFn,
		},
		{
			Name: "encoder_processor_decoder",
			Sig: "encoder_processor_decoder(name, grid, mesh, encoder, processor, decoder, inputs, outputs, " +
				"loss=\"crps\", node_attrs=8, noise_channels=4, noise_hidden=32, data_variables=None, data_dates=3, anemoi=\"0.18.0\", " +
				"keep_batch_sharded=True)",
			Doc: "An anemoi encoder-processor-decoder weather model: the encoder maps the grid onto the mesh, the " +
				"processor (transformer_processor or graph_transformer_processor) works there, the decoder maps back. inputs is the fp32 features per grid point and sample " +
				"the model reads (anemoi: multistep x input variables + prognostic skip + 1 forecast-step column); the " +
				"model appends 4 coordinate features and node_attrs trainable ones per node. outputs is the variables " +
				"predicted per point. noise_channels > 0 injects noise conditioning the processor's layer norms " +
				"(anemoi's ensemble model); loss \"crps\" (almost-fair kernel CRPS over the members: train with " +
				"members >= 2) or \"mse\". Returns a model whose input is [batch, points, inputs]: train() takes " +
				"no seq for it, and members folds into the batch (\"stacked\") or runs one at a time (\"sequential\"). " +
				"data_variables counts every dataset variable per point (prognostic, forcings, diagnostics): with it " +
				"the data loader's batch, [batch, data_dates, 1, points, data_variables] fp32 (data_dates = " +
				"multistep_input + rollout), stays on the GPU for the whole step (in validation a normalised copy " +
				"takes its place) and the model's input is built from it and freed when the forward ends, as anemoi's " +
				"forecasters do; without it the model's input is the batch and lives for the whole step. anemoi is the " +
				"anemoi-models release replayed (default the newest memsh was read against): from 0.9.0 each mapper splits " +
				"its destination nodes into max(chunks, eval_chunks) ranges, each under a checkpoint of its own, writing " +
				"into one output buffer; \"0.8.1\" (0.6.0 to 0.8.1, the Bris story's) runs each mapper under one checkpoint " +
				"and every edge chunk scatters into a tensor over all destination nodes, chunks in training and eval_chunks " +
				"in eval. From 0.17.0 model sharding (parallel(cp=G, cp_mode=\"ulysses\"), anemoi's num_gpus_per_model) " +
				"splits the mappers' and the graph-transformer processor's destination nodes and their edges over the " +
				"G GPUs, the processor exchanging halo nodes; keep_batch_sharded (anemoi's model.keep_batch_sharded) " +
				"has each GPU read and predict its share of the grid points (docs/anemoi.md).",
			Fn: encoderProcessorDecoderFn,
		},
	}
}

func newNodes(thread *starlark.Thread, n *graph.NodeSet, err error) (starlark.Value, error) {
	if err != nil {
		return nil, err
	}
	return &Nodes{n: n, decl: host.CallerPos(thread)}, nil
}

func gridFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var points starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "points", &points); err != nil {
		return nil, err
	}
	n, err := host.AsInt64(points, "points")
	if err != nil {
		return nil, err
	}
	g, err := graph.Grid(name, n)
	return newNodes(thread, g, err)
}

func stretchedGridFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var regional, global starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "regional_points", &regional, "global_points", &global); err != nil {
		return nil, err
	}
	var r, g int64
	if err := ints(intArg{regional, "regional_points", &r}, intArg{global, "global_points", &g}); err != nil {
		return nil, err
	}
	s, err := graph.StretchedGrid(name, r, g)
	return newNodes(thread, s, err)
}

// refinement unpacks a refinement level.
func refinement(v starlark.Value, what string) (int, error) {
	n, err := host.AsInt64(v, what)
	if err != nil {
		return 0, err
	}
	if n < -1<<20 || n > 1<<20 {
		return 0, fmt.Errorf("%s out of range (got %d)", what, n)
	}
	return int(n), nil
}

func icosahedralMeshFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var ref starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "refinement", &ref); err != nil {
		return nil, err
	}
	r, err := refinement(ref, "refinement")
	if err != nil {
		return nil, err
	}
	m, err := graph.IcosahedralMesh(name, r)
	return newNodes(thread, m, err)
}

func stretchedMeshFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var global, regional, frac starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "global_refinement", &global,
		"regional_refinement", &regional, "regional_fraction", &frac); err != nil {
		return nil, err
	}
	g, err := refinement(global, "global_refinement")
	if err != nil {
		return nil, err
	}
	r, err := refinement(regional, "regional_refinement")
	if err != nil {
		return nil, err
	}
	f, err := host.AsFloat(frac, "regional_fraction")
	if err != nil {
		return nil, err
	}
	m, err := graph.StretchedMesh(name, g, r, f)
	return newNodes(thread, m, err)
}

func meshFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var nodes starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "nodes", &nodes); err != nil {
		return nil, err
	}
	n, err := host.AsInt64(nodes, "nodes")
	if err != nil {
		return nil, err
	}
	m, err := graph.Mesh(name, n)
	return newNodes(thread, m, err)
}

// asNodes unwraps a grid or mesh argument.
func asNodes(v starlark.Value, what string) (*Nodes, error) {
	if n, ok := v.(*Nodes); ok {
		return n, nil
	}
	return nil, fmt.Errorf("%s must be a grid or a mesh (got %s)", what, v.Type())
}

func newEdges(src, dst *Nodes, e *graph.EdgeSet, err error) (starlark.Value, error) {
	if err != nil {
		return nil, err
	}
	return &Edges{e: e, src: src, dst: dst}, nil
}

func knnEdgesFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var srcV, dstV, kV starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "src", &srcV, "dst", &dstV, "k", &kV); err != nil {
		return nil, err
	}
	src, dst, err := endsOf(srcV, dstV)
	if err != nil {
		return nil, err
	}
	k, err := host.AsInt64(kV, "k")
	if err != nil {
		return nil, err
	}
	e, err := graph.KNNEdges(src.n, dst.n, k)
	return newEdges(src, dst, e, err)
}

func radiusEdgesFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var srcV, dstV, perV starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "src", &srcV, "dst", &dstV, "per_node", &perV); err != nil {
		return nil, err
	}
	src, dst, err := endsOf(srcV, dstV)
	if err != nil {
		return nil, err
	}
	per, err := host.AsFloat(perV, "per_node")
	if err != nil {
		return nil, err
	}
	e, err := graph.RadiusEdges(src.n, dst.n, per)
	return newEdges(src, dst, e, err)
}

func multiscaleEdgesFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var meshV, perV starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "mesh", &meshV, "per_node?", &perV); err != nil {
		return nil, err
	}
	m, err := asNodes(meshV, "mesh")
	if err != nil {
		return nil, err
	}
	var per float64
	if perV != nil && perV != starlark.None {
		if per, err = host.AsFloat(perV, "per_node"); err != nil {
			return nil, err
		}
		if per <= 0 {
			return nil, fmt.Errorf("per_node must be positive (got %g)", per)
		}
	}
	e, err := graph.MultiscaleEdges(m.n, per)
	return newEdges(m, m, e, err)
}

func endsOf(srcV, dstV starlark.Value) (*Nodes, *Nodes, error) {
	src, err := asNodes(srcV, "src")
	if err != nil {
		return nil, nil, err
	}
	dst, err := asNodes(dstV, "dst")
	if err != nil {
		return nil, nil, err
	}
	return src, dst, nil
}

func graphTransformerFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var srcV, dstV, edgesV, channels, heads, name starlark.Value
	mlpRatio, edgeAttrs, chunks, evalChunks, trainable := starlark.Value(starlark.MakeInt(4)), starlark.Value(starlark.MakeInt(11)),
		starlark.Value(starlark.MakeInt(1)), starlark.Value(starlark.MakeInt(1)), starlark.Value(starlark.MakeInt(8))
	ckpt, offload := true, false
	var backendV starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "src", &srcV, "dst", &dstV, "edges", &edgesV,
		"channels", &channels, "heads", &heads, "mlp_ratio?", &mlpRatio, "edge_attrs?", &edgeAttrs,
		"chunks?", &chunks, "eval_chunks?", &evalChunks, "checkpoint?", &ckpt,
		"trainable_edge_attrs?", &trainable, "cpu_offload?", &offload, "attention_backend?", &backendV, "name?", &name); err != nil {
		return nil, err
	}
	src, dst, err := endsOf(srcV, dstV)
	if err != nil {
		return nil, err
	}
	edges, ok := edgesV.(*Edges)
	if !ok {
		return nil, fmt.Errorf("edges must be edges, e.g. knn_edges(src, dst, k) (got %s)", edgesV.Type())
	}
	e := edges.e
	if *e.Src != *src.n || *e.Dst != *dst.n { // the same node sets, even if declared twice alike
		return nil, fmt.Errorf("edges go from %s to %s, not from %s to %s", e.Src, e.Dst, src.n, dst.n)
	}
	g := &graph.GraphTransformer{Edges: e, Checkpoint: ckpt, CPUOffload: offload}
	if err := ints(intArg{channels, "channels", &g.Channels}, intArg{heads, "heads", &g.Heads},
		intArg{mlpRatio, "mlp_ratio", &g.MLPRatio}, intArg{edgeAttrs, "edge_attrs", &g.EdgeAttrs},
		intArg{chunks, "chunks", &g.Chunks}, intArg{evalChunks, "eval_chunks", &g.EvalChunks},
		intArg{trainable, "trainable_edge_attrs", &g.TrainableEdgeAttrs}); err != nil {
		return nil, err
	}
	if g.Name, err = optName(name); err != nil {
		return nil, err
	}
	if g.Backend, err = optBackend(backendV); err != nil {
		return nil, err
	}
	return newLayer(thread, g)
}

func transformerProcessorFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var meshV, layers, channels, heads, window, name starlark.Value
	segments, mlpRatio := starlark.Value(starlark.MakeInt(2)), starlark.Value(starlark.MakeInt(4))
	qkNorm, offload := true, false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "mesh", &meshV, "layers", &layers, "channels", &channels,
		"heads", &heads, "segments?", &segments, "window?", &window, "mlp_ratio?", &mlpRatio,
		"qk_norm?", &qkNorm, "cpu_offload?", &offload, "name?", &name); err != nil {
		return nil, err
	}
	m, err := asNodes(meshV, "mesh")
	if err != nil {
		return nil, err
	}
	if m.n.Kind != "mesh" {
		return nil, fmt.Errorf("transformer_processor runs over a mesh (got %s)", m.n)
	}
	p := &graph.TransformerProcessor{Mesh: m.n, QKNorm: qkNorm, CPUOffload: offload}
	if err := ints(intArg{layers, "layers", &p.Layers}, intArg{channels, "channels", &p.Channels},
		intArg{heads, "heads", &p.Heads}, intArg{segments, "segments", &p.Segments},
		intArg{mlpRatio, "mlp_ratio", &p.MLPRatio}); err != nil {
		return nil, err
	}
	if p.Window, err = OptInt(window, "window", 0); err != nil {
		return nil, err
	}
	if window != nil && window != starlark.None && p.Window <= 0 {
		return nil, fmt.Errorf("window must be positive, or None for global attention (got %d)", p.Window)
	}
	if p.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, p)
}

func encoderProcessorDecoderFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var gridV, meshV, encV, procV, decV, inputs, outputs starlark.Value
	loss := "crps"
	nodeAttrs, noise, noiseHidden := starlark.Value(starlark.MakeInt(8)), starlark.Value(starlark.MakeInt(4)), starlark.Value(starlark.MakeInt(32))
	var dataVars starlark.Value
	dataDates := starlark.Value(starlark.MakeInt(3))
	version := graph.CurrentVersion().String()
	keepSharded := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "grid", &gridV, "mesh", &meshV,
		"encoder", &encV, "processor", &procV, "decoder", &decV, "inputs", &inputs, "outputs", &outputs,
		"loss?", &loss, "node_attrs?", &nodeAttrs, "noise_channels?", &noise, "noise_hidden?", &noiseHidden,
		"data_variables?", &dataVars, "data_dates?", &dataDates, "anemoi?", &version,
		"keep_batch_sharded?", &keepSharded); err != nil {
		return nil, err
	}
	v, err := graph.ParseVersion(version)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, fmt.Errorf("model name must not be empty")
	}
	switch loss {
	case "crps", "mse":
	default:
		return nil, fmt.Errorf("unknown loss %q for encoder_processor_decoder (known: crps, mse)", loss)
	}
	grid, err := asNodes(gridV, "grid")
	if err != nil {
		return nil, err
	}
	mesh, err := asNodes(meshV, "mesh")
	if err != nil {
		return nil, err
	}
	e := graph.EncoderProcessorDecoder{Name: name, Grid: grid.n, Mesh: mesh.n, Version: v, KeepBatchSharded: keepSharded}
	for _, p := range []struct {
		v    starlark.Value
		what string
	}{{encV, "encoder"}, {procV, "processor"}, {decV, "decoder"}} {
		l, err := asLayer(p.v, p.what)
		if err != nil {
			return nil, err
		}
		switch x := l.(type) {
		case *graph.GraphTransformer:
			if p.what == "encoder" {
				e.Encoder = x
			} else if p.what == "decoder" {
				e.Decoder = x
			} else {
				return nil, fmt.Errorf("processor must be a transformer_processor or graph_transformer_processor (got graph_transformer)")
			}
		case *graph.TransformerProcessor, *graph.GraphTransformerProcessor:
			if p.what != "processor" {
				return nil, fmt.Errorf("%s must be a graph_transformer (got %s)", p.what, l.Kind())
			}
			e.Processor = x.(graph.MeshProcessor)
		default:
			want := "graph_transformer"
			if p.what == "processor" {
				want = "transformer_processor or graph_transformer_processor"
			}
			return nil, fmt.Errorf("%s must be a %s (got %s)", p.what, want, l.Kind())
		}
	}
	if err := ints(intArg{inputs, "inputs", &e.Inputs}, intArg{outputs, "outputs", &e.Outputs},
		intArg{nodeAttrs, "node_attrs", &e.NodeAttrs}, intArg{noise, "noise_channels", &e.NoiseChannels},
		intArg{noiseHidden, "noise_hidden", &e.NoiseHidden}); err != nil {
		return nil, err
	}
	if dataVars != nil && dataVars != starlark.None {
		d := &core.DataBatch{}
		if err := ints(intArg{dataVars, "data_variables", &d.Variables}, intArg{dataDates, "data_dates", &d.Times}); err != nil {
			return nil, err
		}
		e.Data = d
	}
	epd, err := graph.NewEncoderProcessorDecoder(e)
	if err != nil {
		return nil, err
	}
	m := graph.NewGraphModel(epd, loss)
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return NewModel(m, starlark.Tuple{NewLayer(epd, host.CallerPos(thread))}, host.CallerPos(thread)), nil
}
