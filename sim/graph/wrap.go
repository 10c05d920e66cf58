package graph

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Extra checkpoints on a graph model: train(checkpoint=checkpoint(modules=
// [...])) wraps modules of an encoder-processor-decoder in
// torch.utils.checkpoint (non-reentrant), as a user does around anemoi's
// modules. anemoi already checkpoints each mapper whole (_run_mapper) and
// each processor segment, so a wrapped module inside them is a nested
// checkpoint: the enclosing recompute runs it keeping only its inputs,
// and its own backward runs it once more (PyTorch's non-reentrant
// checkpoint nests this way: torch/utils/checkpoint.py; a module inside
// two checkpoints runs three times per step). The replay's nested
// regions (core.Builder.BeginNestedRegion) model both.
//
// The modules a graph model can wrap, by path: "encoder", "decoder" (or
// their kind "graph_transformer", both), "<mapper>.proc" (the mapper's
// GraphTransformerMapperBlock), "<mapper>.proc.conv" (its attention,
// GraphTransformerConv: each edge chunk's call a checkpoint of its own),
// "processor" (or its kind).

// wrappable lists the module paths of e that checkpoint(modules=...) can
// wrap, with the kinds that name them.
func (e *EncoderProcessorDecoder) wrappable() []string {
	var out []string
	for _, m := range []*GraphTransformer{e.Encoder, e.Decoder} {
		l := m.Label()
		out = append(out, l, l+".proc", l+".proc.conv")
	}
	return append(out, processorName(e.Processor.Label()), "graph_transformer", e.Processor.Kind())
}

// WrappableModules is what checkpoint(modules=...) may name in the model
// (core.Wrappable).
func (e *EncoderProcessorDecoder) WrappableModules() []string { return e.wrappable() }

// checkWrapped refuses module names the model does not have, and
// reentrant nesting (anemoi's checkpoints are use_reentrant=False).
func (e *EncoderProcessorDecoder) checkWrapped(b *core.Builder) {
	c := b.Ckpt
	if c.Mode != "modules" {
		return
	}
	known := e.wrappable()
	for _, m := range c.Modules {
		if !slices.Contains(known, m) {
			panic(core.LowerError{Err: &units.Error{Path: e.Name, Msg: fmt.Sprintf("checkpoint(modules=...) names %q, which is not a module of the graph model", m),
				Hint: "a graph model wraps " + strings.Join(known, ", ")}})
		}
	}
	if c.Reentrant {
		panic(core.LowerError{Err: &units.Error{Path: e.Name, Msg: "reentrant checkpoints inside anemoi's (non-reentrant) ones are not simulated",
			Hint: "drop reentrant=True: torch.utils.checkpoint(use_reentrant=False) is what anemoi uses"}})
	}
	if wraps(b, processorName(e.Processor.Label()), e.Processor.Kind()) && e.Processor.offloaded() {
		panic(core.LowerError{Err: &units.Error{Path: e.Name, Msg: "a checkpoint around a processor with cpu_offload is not simulated",
			Hint: "wrap the mappers, or drop the processor's cpu_offload"}})
	}
}

// wraps reports whether checkpoint(modules=...) names path or kind.
func wraps(b *core.Builder, names ...string) bool {
	if b.Ckpt.Mode != "modules" {
		return false
	}
	for _, n := range names {
		if slices.Contains(b.Ckpt.Modules, n) {
			return true
		}
	}
	return false
}

// wrap opens a nested checkpoint region when checkpoint(modules=...)
// names the module (by path or kind); the returned func closes it.
func wrap(b *core.Builder, names ...string) func() {
	if !wraps(b, names...) {
		return func() {}
	}
	return b.BeginNestedRegion("")
}
