package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MeshProcessor is the processor of an encoder-processor-decoder: layers
// over the hidden mesh's nodes whose layer norms take the ensemble noise.
// TransformerProcessor (attention over the nodes) and
// GraphTransformerProcessor (attention along the mesh's edges) are the
// two anemoi ships.
type MeshProcessor interface {
	core.Layer
	mesh() *NodeSet
	channels() int64
	// conditioned is a copy named "processor" unless named, whose layer
	// norms take cond noise channels (0: plain layer norms).
	Conditioned(cond int64) MeshProcessor
	// lowerCond runs the processor on x [batch * mesh nodes, channels],
	// conditioned on cond [rows, noise channels] (noValue: no noise).
	lowerCond(b *core.Builder, x, cond core.Value) core.Value
	offloaded() bool // cpu_offload
}

func (p *TransformerProcessor) offloaded() bool      { return p.CPUOffload }
func (p *GraphTransformerProcessor) offloaded() bool { return p.CPUOffload }

func (p *TransformerProcessor) mesh() *NodeSet  { return p.Mesh }
func (p *TransformerProcessor) channels() int64 { return p.Channels }

func (p *TransformerProcessor) Conditioned(cond int64) MeshProcessor {
	c := *p
	c.Cond, c.Name, c.inModel = cond, processorName(p.Name), true
	return &c
}

// offloadSummary is a processor summary's note on cpu_offload.
func offloadSummary(offload bool) string {
	if offload {
		return ", cpu_offload"
	}
	return ""
}

// processorName is a processor's scope: its own name, else "processor".
func processorName(name string) string {
	if name == "" {
		return "processor"
	}
	return name
}

// validateBlocks checks the sizes both processors share: positive, heads
// dividing channels, segments dividing layers (BaseProcessor's assert).
func validateBlocks(path string, layers, channels, heads, mlpRatio, segments int64) error {
	for _, f := range []struct {
		what string
		n    int64
	}{{"layers", layers}, {"channels", channels}, {"heads", heads}, {"mlp_ratio", mlpRatio}, {"segments", segments}} {
		if err := core.Positive(path, f.what, f.n); err != nil {
			return err
		}
	}
	if channels%heads != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("heads must divide channels (channels=%d, heads=%d)", channels, heads)}
	}
	if layers%segments != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("segments must divide layers (layers=%d, segments=%d)", layers, segments),
			Hint: "anemoi asserts num_layers % num_chunks == 0 (BaseProcessor)"}
	}
	return nil
}

// runSegments lowers BaseProcessor.run_layers (layers/processor.py
// @models-0.8.1): the layers split into segments ProcessorChunks, each run
// under one activation checkpoint, block lowering one layer. With offload
// (the processor's cpu_offload) each chunk is wrapped in offload_wrapper
// (BaseProcessor.offload_layers, layers/processor.py@models-0.8.1 l.61-63,
// called after build_layers: l.169, l.372): save_on_cpu inside the
// checkpoint, whose innermost hooks win, so the chunk's saved tensors go
// to pinned host memory and the backward recomputes nothing
// (core.Region.Offload).
//
// Wrapped (checkpoint(modules=["processor"]), wrap.go), the processor runs
// under a checkpoint of its own and the segments' checkpoints nest in it.
func runSegments(b *core.Builder, x core.Value, layers, segments int64, offload, wrapped bool, block func(core.Value) core.Value) core.Value {
	per := layers / segments
	for s := int64(0); s < segments; s++ {
		done := b.Scope(fmt.Sprintf("proc.%d", s))
		begin := b.BeginRegion
		if wrapped {
			begin = b.BeginNestedRegion
		}
		closeRegion := begin("")
		if offload {
			b.OffloadRegion()
		}
		for l := int64(0); l < per; l++ {
			d := b.Scope(fmt.Sprintf("blocks.%d", l))
			x = block(x)
			d()
		}
		closeRegion()
		done()
	}
	return x
}
