package core

import "github.com/memsh/memsh/sim/units"

// Values a model makes once a forward, before its decoder layers run, and
// hands to every layer: transformers' rotary cos and sin
// (LlamaModel.forward: position_embeddings = self.rotary_emb(...)) and its
// 4-D attention mask (masking_utils.create_causal_mask), both made in the
// base model's forward ahead of the layer loop (modeling_llama.py,
// 5.25.0), so outside every layer's checkpoint. memsh lowers them where
// the first layer that reads them asks for them (nn's forwardTables and
// forwardMask, which Share them with the later layers); OutsideRegions
// then moves the op that made them ahead of the open checkpoint regions,
// so that each checkpointed layer reads them as an input of its region:
// saved once (one storage) at the forward's end, kept until the backward
// has run the last recompute that reads them, and never recomputed
// (torch 2.15's torch/utils/checkpoint.py: the non-reentrant frame saves
// its inputs, save_inputs l. 1001; hf_block_saved.py measures it:
// TestGraniteCheckpointSavesAsTransformers, TestEagerMaskOnceAForward).

// handPositionIDs hands the block being lowered the position_ids its
// base model made once a forward, before its layers: torch.arange(seq) +
// past_seen_tokens, unsqueezed to [1, seq] int64 (LlamaModel.forward,
// modeling_llama.py l. 379-380 at 5.25.0; cache_position.unsqueeze(0) in
// 4.x, a view of the cache_position the layers get too), passed to every
// decoder layer as a keyword argument (l. 398). No op of a layer reads it
// (the rotary pair was made from it before the layers), but a
// checkpointed layer's frame keeps its arguments until its recompute:
// the "kwarg" op, which moves nothing and launches no kernel, makes it an
// input of the block's region. The first block makes it (ahead of every
// region, OutsideRegions), the later ones read it: one storage, held
// through the step's forward (hf_block_saved.py's held: (1, 32) int64,
// 256 bytes at any depth, TestCheckpointHoldsForwardOnceValues).
func (b *Builder) handPositionIDs() {
	const key = "position_ids"
	v, ok := b.SharedValue(key)
	if !ok {
		i := b.AddOp("arange", key, nil)
		v = b.Out(i, key, []int64{1, b.Seq}, units.INT64, "the base model's position_ids, made once a forward and handed to every layer")
		b.Val(v).Grad = false
		b.Op(i).NoGradB = true
		b.Op(i).Bytes = float64(3 * units.INT64.Bytes(b.Seq)) // arange writes, + past_seen_tokens reads and writes
		b.Share(key, v)
		b.OutsideRegions(i)
	}
	i := b.AddOp("kwarg", key, []Value{v})
	b.Op(i).NoGradB = true
}

// decoderRepeats are the repeats whose blocks Model.PositionIDs hands
// position_ids: those under the model's sequentials (its decoder's
// layers) and a DecoderStacks layer's, not a tower's.
func decoderRepeats(m *Model) map[*Repeat]bool {
	out := map[*Repeat]bool{}
	var walk func(ls []Layer)
	walk = func(ls []Layer) {
		for _, l := range ls {
			switch x := l.(type) {
			case *Repeat:
				out[x] = true
			case *Sequential:
				walk(x.Layers)
			case DecoderStacks:
				walk(x.DecoderStacks())
			}
		}
	}
	walk(m.Layers)
	return out
}

// DecoderStacks is a layer that lowers decoder stacks of its own, whose
// layers its forward hands the model's position_ids as the model's own
// layers are (HRM-Text's L_module and H_module: HrmTextModel.forward
// passes position_ids to each stack, which hands it to each layer,
// modular_hrm_text.py at transformers 5.25.0).
type DecoderStacks interface {
	DecoderStacks() []Layer
}

// HasDecoderLayers says whether the model has a repeat() whose blocks
// Model.PositionIDs would hand position_ids to.
func (m *Model) HasDecoderLayers() bool { return len(decoderRepeats(m)) > 0 }

// OutsideRegions moves op i, the op appended last, ahead of the outermost
// open checkpoint region (out of every open one): the ops it passes are
// shifted by one, with every index into them (their values' producers,
// the regions and compiled graphs they open and close, the collectives
// beside their GEMMs). Nothing moves when no region is open (no
// checkpoint, eval, a compiled step's partitioner) or i is not the last op.
func (b *Builder) OutsideRegions(i int32) {
	p := b.P
	if b.region == 0 || int(i) != len(p.Ops)-1 {
		return
	}
	root := b.region
	for p.Regions[root-1].Parent != 0 {
		root = p.Regions[root-1].Parent
	}
	first := p.Regions[root-1].First
	moved := p.Ops[i]
	copy(p.Ops[first+1:i+1], p.Ops[first:i])
	moved.Region, moved.Block = 0, 0
	p.Ops[first] = moved
	for j := first; j <= i; j++ {
		for _, v := range p.Ops[j].Out {
			p.Values[v].Producer = j
		}
	}
	open := map[int32]bool{}
	for id := b.region; id != 0; id = p.Regions[id-1].Parent {
		open[id] = true
	}
	for k := root - 1; k < int32(len(p.Regions)); k++ { // root and the regions nested in it since
		r := &p.Regions[k]
		r.First++
		if !open[k+1] {
			r.End++
		}
	}
	for k := range p.Graphs {
		if g := &p.Graphs[k]; g.First >= first {
			g.First, g.End = g.First+1, g.End+1
		}
	}
	for k := range p.Comm {
		if c := &p.Comm[k]; c.Beside > first { // 1 + an op index at or past first
			c.Beside++
		}
	}
	if p.Stage != nil {
		for k := range p.Stage.Chunks {
			if c := &p.Stage.Chunks[k]; c.FirstOp > first {
				c.FirstOp++
			}
		}
	}
}
