package core

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
