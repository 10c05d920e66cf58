package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// The layer patterns of the decoder families (buildDecoder): which layers
// slide over a window and which attend to every key, from sliding_window,
// layer_types and the families' own keys.

// slidingLayers lists the sliding-window layers: from layer_types
// ("sliding_attention" / "full_attention") when the config has it, else
// Gemma 2's even layers (Gemma2DecoderLayer.is_sliding) or Gemma 3's
// sliding_window_pattern (default 6: layer i is local unless (i+1) % 6 == 0).
func (c *hfConfig) slidingLayers(f decoderFamily, layers int64) map[int64]bool {
	out := map[int64]bool{}
	if f.everyWindow && c.has("sliding_window") {
		for i := int64(0); i < layers; i++ {
			out[i] = true
		}
		return out
	}
	if !f.windows || f.nope && !c.smolLM3Windows() {
		return out
	}
	if (f.graniteSWA || f.cwm) && c.null("sliding_window") {
		// GraniteSWAModel.forward and CwmModel.forward make the sliding
		// mask whatever layer_types says (create_sliding_window_causal_mask
		// raises; a window of 0, which CwmConfig reads as None, is refused
		// as not positive)
		cls := map[bool]string{false: "GraniteSWA", true: "Cwm"}[f.cwm]
		c.fail("sliding_window", "is null: transformers 5.25.0's %sModel makes a sliding-window mask every forward and cannot without it (\"Could not find a `sliding_window` argument in the config\"); give the window (%sConfig's default is %d)",
			cls, cls, f.windowDef)
		return out
	}
	if f.cwm { // CwmModel makes the sliding mask every forward: a window, whatever the layers
		c.sizeOr("sliding_window", f.windowDef)
	}
	if c.has("layer_types") {
		for i, on := range c.layerTypes(layers, "sliding_attention", "full_attention") {
			if on {
				out[int64(i)] = true
			}
		}
		if (f.windowsUnlessNull || f.mellum) && len(out) > 0 && c.null("sliding_window") {
			// create_sliding_window_causal_mask raises ValueError
			c.fail("sliding_window", "is null, but layer_types has sliding_attention layers: transformers 5.25.0 cannot build their mask (\"Could not find a `sliding_window` argument in the config\"); give the window, or make those layers full_attention")
		}
		return out
	}
	if f.graniteSWA || f.cwm { // GraniteSWAConfig's and CwmConfig's __post_init__: full where i % 4 == 0
		for i := int64(0); i < layers; i++ {
			out[i] = i%4 != 0
		}
		return out
	}
	if f.windowsUnlessNull {
		if !c.null("sliding_window") {
			for i := int64(0); i < layers; i++ {
				out[i] = true
			}
		}
		return out
	}
	if f.nope { // SmolLM3Config: the layers without rope slide
		for i, n := range c.noRopeLayers(layers) {
			out[int64(i)] = n
		}
		return out
	}
	switch f.gemma {
	case 2:
		for i := int64(0); i < layers; i += 2 {
			out[i] = true
		}
	case 3:
		p := max(c.sizeOr("sliding_window_pattern", 6), 1) // below 1: c.err's already, read back as 0
		for i := int64(0); i < layers; i++ {
			if (i+1)%p != 0 {
				out[i] = true
			}
		}
	}
	return out
}

// layerTypes reads layer_types, one attention type per layer, each of
// them marked or other: which layers are marked. A list of another
// length or naming another type is c.err's (the layers then unmarked).
func (c *hfConfig) layerTypes(layers int64, marked, other string) []bool {
	out := make([]bool, max(layers, 0))
	list, ok := c.raw["layer_types"].([]any)
	if !ok || int64(len(list)) != layers {
		c.fail("layer_types", "must list one attention type per layer (%d)", layers)
		return out
	}
	for i, v := range list {
		switch v {
		case marked:
			out[i] = true
		case other:
		default:
			c.fail("layer_types", "names an attention type memsh does not know (got %s; known: %s, %s)", describeJSON(v), marked, other)
			return make([]bool, len(out))
		}
	}
	return out
}

// windowedMoEBlocks are the decoder layers of a model whose layers differ
// by two flags, sliding (attns[true]'s window) and sparse (moe, else
// dense): a pre-norm attention and a pre-norm feed-forward, one block per
// kind met, shared by the layers of that kind (Flint, MiMo-V2-Flash).
func windowedMoEBlocks(sliding, sparse []bool, attns map[bool]*nn.Attention, dense, moe core.Layer, norm func(string) core.Layer) []core.Layer {
	made := map[[2]bool]core.Layer{}
	blocks := make([]core.Layer, len(sliding))
	for i := range blocks {
		k := [2]bool{sliding[i], sparse[i]}
		if made[k] == nil {
			ff := dense
			if k[1] {
				ff = moe
			}
			made[k] = seq(res(norm("input_layernorm"), attns[k[0]]), res(norm("post_attention_layernorm"), ff))
		}
		blocks[i] = made[k]
	}
	return blocks
}
