package hf

// Nemotron (model_type nemotron: nvidia/Minitron-4B-Base, Minitron-8B-Base,
// Nemotron-Mini-4B-Instruct; models/nemotron at
// transformers 5.25.0) is built by buildDecoder: Llama's layer with
// attention_bias on q, k, v and o and mlp_bias, an MLP of up_proj, the
// squared ReLU (hidden_act "relu2") and down_proj, every norm
// NemotronLayerNorm1P (a LayerNorm with a bias weighted by weight + 1.0:
// nn.Norm.OnePlus), and a rope on the first partial_rotary_factor of each
// head (nemotronRotary), the rest cat back.

// nemotronRotary is the share of each head NemotronRotaryEmbedding turns:
// rope_parameters' partial_rotary_factor, which NemotronConfig fills from
// the top-level key and defaults to 0.5 (configuration_nemotron.py,
// __post_init__'s kwargs.setdefault).
func (c *hfConfig) nemotronRotary() float64 {
	if rp, ok := c.raw["rope_parameters"].(map[string]any); ok {
		if _, set := rp["partial_rotary_factor"]; set && !c.has("partial_rotary_factor") {
			sub := c.sub("rope_parameters")
			f := sub.rotaryFactor("partial_rotary_factor", 0.5)
			if sub.err != nil && c.err == nil {
				c.err = sub.err
			}
			return f
		}
	}
	return c.rotaryFactor("partial_rotary_factor", 0.5)
}
