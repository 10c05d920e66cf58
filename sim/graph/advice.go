package graph

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// Advise adds notes to the report of a graph model's failing step:
// what the failing allocation scales with and which setting changes it,
// the lessons of SEEDS.md story 1. Each note is read off the failing
// tensor and the plan; none is a guess at a figure.
//
//   - a per-edge tensor of a mapper in the validation pass: validation
//     splits the edges by eval_chunks (ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER,
//     default 1, block.py@models-0.8.1 l.724), never by chunks; from
//     anemoi-models 0.9 the larger of both splits every pass
//     (mapper_chunked.go);
//   - the same in a graph-transformer processor: its eval chunks
//     (ANEMOI_INFERENCE_NUM_CHUNKS_PROCESSOR, else _NUM_CHUNKS);
//   - a tensor over all destination nodes of stacked members: no edge
//     chunking shrinks it, running the members one at a time divides it;
//   - a processor's recompute: it rebuilds layers/segments layers at once.
func Advise(plan *core.Plan, rep *replay.Report) {
	if rep.OOM == nil || len(plan.Model.Layers) != 1 {
		return
	}
	epd, ok := plan.Model.Layers[0].(*EncoderProcessorDecoder)
	if !ok {
		return
	}
	a := rep.OOM.Alloc
	path := a.Tensor
	if strings.HasPrefix(path, "member") {
		if i := strings.IndexByte(path, '.'); i > 0 {
			path = path[i+1:]
		}
	}
	layer, _, _ := strings.Cut(path, ".")
	eval := a.Phase == replay.PhaseValidation || plan.Phase == core.Eval
	members := max(plan.Members, 1)
	perNode := func(n *NodeSet) bool {
		return len(a.Shape) > 0 && n != nil && a.Shape[0] == plan.Batch*members*n.Nodes && plan.MembersMode != "sequential" && members > 1
	}
	for _, g := range []*GraphTransformer{epd.Encoder, epd.Decoder} {
		if layer != g.Label() {
			continue
		}
		switch {
		case perNode(g.Edges.Dst):
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s spans all %d destination rows of the %d stacked members: no edge chunking shrinks it; "+
				"members_mode=\"sequential\" runs the members one at a time, 1/%d of it", a.Tensor, a.Shape[0], members, members))
		case g.chunkedMapper():
			k := max(g.Chunks, g.EvalChunks)
			rep.Notes = append(rep.Notes, fmt.Sprintf("anemoi-models %s runs the %s's destination nodes in max(chunks, eval_chunks)=%d chunks, one at a time "+
				"(ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER counts in training too): more chunks shrink %s", g.Version, g.Label(), k, a.Tensor))
		case eval && (g.EvalChunks == 1 || g.EvalChunks < g.Chunks):
			rep.Notes = append(rep.Notes, fmt.Sprintf("the validation pass splits the %s's edges into eval_chunks=%d pieces, not chunks=%d "+
				"(anemoi: ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER, default 1, read at import): raise eval_chunks", g.Label(), g.EvalChunks, g.Chunks))
		}
	}
	if layer == epd.Processor.Label() && a.Phase == replay.PhaseRecompute {
		layers, segments := processorSegments(epd.Processor)
		rep.Notes = append(rep.Notes, fmt.Sprintf("the backward recomputes %d of the %s's %d layers at once (segments=%d, anemoi's processor num_chunks): "+
			"more segments recompute fewer, each keeping its input until the backward", layers/segments, epd.Processor.Label(), layers, segments))
	}
	if p, ok := epd.Processor.(*GraphTransformerProcessor); ok && layer == p.Label() && eval && p.EvalChunks == 1 && !perNode(p.mesh()) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the validation pass runs each %s block's %d edges in eval_chunks=%d piece "+
			"(anemoi: ANEMOI_INFERENCE_NUM_CHUNKS_PROCESSOR, else ANEMOI_INFERENCE_NUM_CHUNKS, default 1): raise the processor's eval_chunks",
			p.Label(), p.Edges.Count*plan.Batch*members, p.EvalChunks))
	}
}

// processorSegments is a processor's layers and checkpoint segments.
func processorSegments(p MeshProcessor) (layers, segments int64) {
	switch p := p.(type) {
	case *TransformerProcessor:
		return p.Layers, p.Segments
	case *GraphTransformerProcessor:
		return p.Layers, p.Segments
	}
	return 1, 1
}
