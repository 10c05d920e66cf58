package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// Setting is one of an encoder-processor-decoder's chunk settings: what a
// user changes in anemoi's config or environment without changing the
// model's maths, and what the notes of Advise name. The advice engine
// (package advise) turns them.
type Setting struct {
	Name   string // the argument, as graph_transformer() and the processors take it
	Layers string // the layers it sets, as the change is written ("encoder, decoder")
	Value  int64  // its value now
	Eval   bool   // read by the validation pass (eval mode) only; else by training only
	Max    int64  // the largest value the layers accept
	Divide int64  // when > 0, a value must divide it (a processor's layers into segments)
}

// Settings lists the chunk settings of a graph model (none for other
// models): the mappers' eval_chunks (ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER,
// one variable for both) and chunks (model.encoder/decoder.num_chunks),
// a graph-transformer processor's eval_chunks
// (ANEMOI_INFERENCE_NUM_CHUNKS) and the processor's checkpoint segments
// (model.processor.num_chunks).
func Settings(m *core.Model) []Setting {
	e := modelEPD(m)
	if e == nil {
		return nil
	}
	mapperMax := min(e.Encoder.Edges.Dst.Nodes, e.Decoder.Edges.Dst.Nodes)
	mappers := e.Encoder.Label() + ", " + e.Decoder.Label()
	out := []Setting{
		{Name: "eval_chunks", Layers: mappers, Value: e.Encoder.EvalChunks, Eval: true, Max: mapperMax},
		{Name: "chunks", Layers: mappers, Value: e.Encoder.Chunks, Max: mapperMax},
	}
	if p, ok := e.Processor.(*GraphTransformerProcessor); ok {
		out = append(out, Setting{Name: "eval_chunks", Layers: p.Label(), Value: p.EvalChunks, Eval: true, Max: p.Edges.Dst.Nodes})
	}
	if layers, segments := processorSegments(e.Processor); layers > 1 {
		out = append(out, Setting{Name: "segments", Layers: e.Processor.Label(), Value: segments, Max: layers, Divide: layers})
	}
	return out
}

// WithSetting is a copy of m with setting s at v; m is left as it is.
func WithSetting(m *core.Model, s Setting, v int64) (*core.Model, error) {
	e := modelEPD(m)
	if e == nil {
		return nil, fmt.Errorf("model %q is not a graph model", m.Name)
	}
	c := *e
	mappers := e.Encoder.Label() + ", " + e.Decoder.Label()
	switch {
	case s.Layers == mappers && (s.Name == "eval_chunks" || s.Name == "chunks"):
		enc, dec := *e.Encoder, *e.Decoder
		for _, g := range []*GraphTransformer{&enc, &dec} {
			if s.Name == "eval_chunks" {
				g.EvalChunks = v
			} else {
				g.Chunks = v
			}
		}
		c.Encoder, c.Decoder = &enc, &dec
	case s.Layers == e.Processor.Label():
		switch p := e.Processor.(type) {
		case *GraphTransformerProcessor:
			q := *p
			if s.Name == "segments" {
				q.Segments = v
			} else {
				q.EvalChunks = v
			}
			c.Processor = &q
		case *TransformerProcessor:
			q := *p
			q.Segments = v
			c.Processor = &q
		}
	default:
		return nil, fmt.Errorf("model %q has no setting %s of %s", m.Name, s.Name, s.Layers)
	}
	out := *m
	out.Layers = []core.Layer{&c}
	return &out, nil
}

// modelEPD is the encoder-processor-decoder a graph model is made of.
func modelEPD(m *core.Model) *EncoderProcessorDecoder {
	if m == nil || len(m.Layers) != 1 {
		return nil
	}
	e, _ := m.Layers[0].(*EncoderProcessorDecoder)
	return e
}
