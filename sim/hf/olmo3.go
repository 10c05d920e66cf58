package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// OLMo 3 (model_type olmo3; models/olmo3/modeling_olmo3.py at
// transformers 5.25.0) is OLMo 2's decoder layer (Olmo3RMSNorm is
// Olmo2RMSNorm, q_norm and k_norm over the whole width, the norms after
// each sublayer) whose attention slides over the last sliding_window
// keys (Olmo3Config's default 4096) in the layers layer_types names
// "sliding_attention"; without layer_types, Olmo3Config's pattern: every
// layer but each fourth ((i + 1) % 4 != 0). Olmo3RotaryEmbedding makes
// one cos and sin pair a layer type, each in fp32 (its forward does not
// cast them to x.dtype, as Olmo2RotaryEmbedding), from that type's
// rope_parameters (rope_scaling, yarn in the published configs, updates only
// the full layers'): the sliding layers rotate with one pair, the full
// ones with the other.

// olmoBlocks is each layer's block: OLMo 2's all alike; OLMo 3's with a
// sliding-window attention and its own rotary pair where layer_types
// (or its default) says "sliding_attention".
func (c *hfConfig) olmoBlocks(full *nn.Attention, layers int64, block func(*nn.Attention) core.Layer) []core.Layer {
	sliding := make([]bool, max(layers, 0))
	var local nn.Attention
	if c.modelType == "olmo3" {
		sliding = c.olmo3Sliding(layers)
		full.RopeTables = "rotary_emb.full_attention"
		local = *full
		local.Window = c.sizeOr("sliding_window", 4096)
		local.RopeTables = "rotary_emb.sliding_attention"
	}
	blocks := make([]core.Layer, len(sliding))
	var global, slide core.Layer
	for i, on := range sliding {
		switch {
		case on && slide == nil:
			slide = block(&local)
		case !on && global == nil:
			global = block(full)
		}
		blocks[i] = global
		if on {
			blocks[i] = slide
		}
	}
	return blocks
}

// olmo3Sliding lists the sliding layers: layer_types, else Olmo3Config's
// pattern.
func (c *hfConfig) olmo3Sliding(layers int64) []bool {
	c.object("rope_parameters")
	if _, ok := c.raw["sliding_window"]; ok && !c.has("sliding_window") {
		c.fail("sliding_window", "must be a window size for the sliding_attention layers (got null)")
	}
	if c.has("layer_types") {
		return c.layerTypes(layers, "sliding_attention", "full_attention")
	}
	sliding := make([]bool, max(layers, 0))
	for i := range sliding {
		sliding[i] = (i+1)%4 != 0
	}
	return sliding
}
