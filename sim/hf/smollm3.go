package hf

import "encoding/json"

// SmolLM3 (model_type smollm3: HuggingFaceTB/SmolLM3-3B and -3B-Base;
// models/smollm3/modeling_smollm3.py at transformers 5.25.0) is Llama
// (buildDecoder, attention_bias and mlp_bias, the head tied by default)
// with NoPE layers: SmolLM3Attention rotates q and k only where
// config.no_rope_layers[layer] is 1. SmolLM3Config makes the list when
// the config has none, one layer in no_rope_layer_interval (default 4)
// without rope: layer i has rope unless (i + 1) % interval == 0. A layer
// slides over the last sliding_window keys only with use_sliding_window
// (default false) and sliding_window set: where layer_types says
// "sliding_attention", and without layer_types, the NoPE layers.

// noRopeLayers lists the layers without rope (SmolLM3Config's
// no_rope_layers, 0 for NoPE, or its default from no_rope_layer_interval).
func (c *hfConfig) noRopeLayers(layers int64) []bool {
	out := make([]bool, max(layers, 0))
	if !c.has("no_rope_layers") {
		interval := max(c.sizeOr("no_rope_layer_interval", 4), 1) // below 1: c.err's already
		for i := range out {
			out[i] = (int64(i)+1)%interval == 0
		}
		return out
	}
	list, ok := c.raw["no_rope_layers"].([]any)
	if !ok || int64(len(list)) != layers {
		c.fail("no_rope_layers", "must list 1 (rope) or 0 (no rope) for each of the %d layers (got %s)", layers, describeJSON(c.raw["no_rope_layers"]))
		return out
	}
	for i, v := range list {
		switch n, _ := v.(json.Number); n {
		case "1":
		case "0":
			out[i] = true
		default:
			c.fail("no_rope_layers", "must list 1 (rope) or 0 (no rope) for each layer (got %s at %d)", describeJSON(v), i)
			return make([]bool, len(out))
		}
	}
	return out
}

// smolLM3Windows: SmolLM3's layers slide only with use_sliding_window
// and a sliding_window (SmolLM3Attention.sliding_window).
func (c *hfConfig) smolLM3Windows() bool {
	return c.flag("use_sliding_window", false) && c.has("sliding_window")
}
