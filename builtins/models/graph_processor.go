package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/graph"
	"go.starlark.net/starlark"
)

// graphProcessorBuiltins: graph_transformer_processor, the processor that
// attends along the mesh's edges (anemoi's GraphTransformerProcessor).
func GraphProcessorBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "graph_transformer_processor",
		Sig: "graph_transformer_processor(edges, layers, channels, heads, segments=2, eval_chunks=1, mlp_ratio=4, " +
			"qk_norm=True, edge_attrs=11, trainable_edge_attrs=8, cpu_offload=False, attention_backend=None, name=None)",
		Doc: "anemoi's GraphTransformerProcessor over a mesh's own edges (edges = multiscale_edges(mesh)): layers " +
			"graph-transformer blocks, each projecting the edge attributes and attending along the edges into " +
			"every node (the mappers' message passing: per-edge tensors kept for backward, an fp32 scatter over " +
			"all nodes), with per-head q/k layer norms (qk_norm) and a GELU node MLP of mlp_ratio * channels. " +
			"segments is anemoi's processor num_chunks: the layers run in that many checkpointed segments, so " +
			"the backward recomputes layers/segments layers at once. The blocks split their edges only in eval: " +
			"eval_chunks (ANEMOI_INFERENCE_NUM_CHUNKS_PROCESSOR, else ANEMOI_INFERENCE_NUM_CHUNKS, default 1). " +
			"edge_attrs is the edge feature width (length 1 + direction 2 + trainable_edge_attrs, anemoi's " +
			"trainable_parameters.hidden2hidden). In a model with noise its layer norms are conditional on the " +
			"noise (ConditionalLayerNorm, left in fp32). " + offloadDoc + " " + backendDoc + " The processor of anemoi's graphtransformer_ens.yaml.",
		Fn: graphTransformerProcessorFn,
	}}
}

// backendDoc documents the graph-transformer blocks' attention_backend.
const backendDoc = "attention_backend is anemoi's graph_attention_backend (the runtime override " +
	"ANEMOI_INFERENCE_GRAPHTRANSFORMER_ATTENTION_BACKEND is the same setting): \"pyg\" is PyG's message passing " +
	"(per-edge query, key, value, softmax and message tensors, kept for backward, and a scatter over all destination " +
	"rows), \"triton\" anemoi's fused Triton kernel (anemoi-models 0.11.0 and later, anemoi-core PR #631): an online " +
	"softmax per destination row that keeps no per-edge tensor, saving its inputs, an fp32 copy of its output, the " +
	"log-sum-exp and the CSC index it builds per call. None is the release's default: \"triton\" from 0.11.0, " +
	"\"pyg\" before (the model's anemoi=)."

// optBackend unpacks attention_backend=None|string ("" for the release's
// default; the layer's Validate checks the name).
func optBackend(v starlark.Value) (string, error) {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return "", nil
	case starlark.String:
		return string(v), nil
	}
	return "", fmt.Errorf("attention_backend must be \"pyg\", \"triton\" or None (got %s)", v.Type())
}

// offloadDoc documents the processors' cpu_offload.
const offloadDoc = "cpu_offload is anemoi's model.processor.cpu_offload: each checkpointed segment runs under " +
	"save_on_cpu (offload_wrapper) inside its checkpoint, whose innermost hooks win, so every tensor the segment saves " +
	"is copied to pinned host memory in the forward and back in the backward (PCIe both ways, r.host_memory) and " +
	"nothing is recomputed; the segment inputs stay on the GPU."

func graphTransformerProcessorFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var edgesV, layers, channels, heads, name starlark.Value
	segments, evalChunks, mlpRatio := starlark.Value(starlark.MakeInt(2)), starlark.Value(starlark.MakeInt(1)), starlark.Value(starlark.MakeInt(4))
	edgeAttrs, trainable := starlark.Value(starlark.MakeInt(11)), starlark.Value(starlark.MakeInt(8))
	qkNorm, offload := true, false
	var backendV starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "edges", &edgesV, "layers", &layers, "channels", &channels,
		"heads", &heads, "segments?", &segments, "eval_chunks?", &evalChunks, "mlp_ratio?", &mlpRatio,
		"qk_norm?", &qkNorm, "edge_attrs?", &edgeAttrs, "trainable_edge_attrs?", &trainable, "cpu_offload?", &offload,
		"attention_backend?", &backendV, "name?", &name); err != nil {
		return nil, err
	}
	edges, ok := edgesV.(*Edges)
	if !ok {
		return nil, fmt.Errorf("edges must be the mesh's edges, e.g. multiscale_edges(mesh) (got %s)", edgesV.Type())
	}
	p := &graph.GraphTransformerProcessor{Edges: edges.e, QKNorm: qkNorm, CPUOffload: offload}
	if err := ints(intArg{layers, "layers", &p.Layers}, intArg{channels, "channels", &p.Channels},
		intArg{heads, "heads", &p.Heads}, intArg{segments, "segments", &p.Segments},
		intArg{evalChunks, "eval_chunks", &p.EvalChunks}, intArg{mlpRatio, "mlp_ratio", &p.MLPRatio},
		intArg{edgeAttrs, "edge_attrs", &p.EdgeAttrs}, intArg{trainable, "trainable_edge_attrs", &p.TrainableEdgeAttrs}); err != nil {
		return nil, err
	}
	var err error
	if p.Name, err = optName(name); err != nil {
		return nil, err
	}
	if p.Backend, err = optBackend(backendV); err != nil {
		return nil, err
	}
	return newLayer(thread, p)
}
