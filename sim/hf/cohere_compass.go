package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildCohereCompass builds transformers' CohereCompassForCausalLM
// (model_type cohere_compass_text: the text model of Cohere's
// North-Micro-Vision, CohereLabs/North-Micro-Vision-Instruct;
// models/cohere_compass/modular_cohere_compass.py at 5.25.0): Cohere 2's
// parallel layer (buildCohere2: one Cohere2LayerNorm, attention and MLP
// side by side on its output, summed with the residual) with these
// differences:
//
//   - the rotary embedding is Qwen3-VL's interleaved M-RoPE made once a
//     forward for each layer type (CohereCompassRotaryEmbedding): a layer
//     rotates q and k where rope_parameters[its layer_types entry] is an
//     object and has no positional encoding where it is null; the tables
//     are [batch, seq, head_dim] (position_ids expanded over the three
//     axes and the batch), in the embeddings' dtype, and apply_rotary_pos_emb
//     is Qwen3's rotate_half over the whole head, in q's dtype;
//   - the "sliding_attention" layers attend to the last sliding_window
//     keys (default 4096), the "full_attention" ones to every key; without
//     layer_types every layer is full (CohereCompassTextConfig);
//   - head_dim is config.json's, else hidden_size // num_attention_heads
//     (the config class sets that, then the file's head_dim replaces it);
//     num_key_value_heads defaults to the heads;
//   - logit_scale defaults to None: the logits are not scaled (1.0).
//
// rope_parameters without an entry for a layer type the model uses is
// refused (the rotary embedding reads rope_parameters[layer_type]: a
// KeyError), as is a partial_rotary_factor below 1 under a rope_type
// that honours it (the table would be narrower than the head, which
// apply_rotary_pos_emb cannot apply). The vision tower
// (CohereCompassForConditionalGeneration, model_type cohere_compass) is
// not modelled.
func buildCohereCompass(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.sizeOr("hidden_size", 8192)
	layers := c.sizeOr("num_hidden_layers", 40)
	heads := c.sizeOr("num_attention_heads", 64)
	kv := c.kvHeads("num_key_value_heads", heads)
	vocab := c.sizeOr("vocab_size", 256000)
	inter := c.sizeOr("intermediate_size", 22528)
	hd := hidden / max(heads, 1) // CohereCompassTextConfig.__post_init__: hidden_size // num_attention_heads,
	if c.has("head_dim") {       // which a head_dim in config.json then replaces (super().__post_init__(**kwargs))
		hd = c.intValue("head_dim", 1)
	}
	c.object("rope_scaling")
	tie, bias := c.flag("tie_word_embeddings", true), c.flag("attention_bias", false)
	act, drop := c.mlpAct("hidden_act", "silu", true), c.prob("attention_dropout", 0)
	scale := 1.0
	if !c.null("logit_scale") {
		scale = c.number("logit_scale", 1)
		if c.err == nil && !(scale > 0) {
			c.fail("logit_scale", "must be a positive number or null (got %g): the head multiplies the logits by it", scale)
		}
	}
	sliding := make([]bool, max(layers, 0))
	if c.has("layer_types") {
		sliding = c.layerTypes(layers, "sliding_attention", "full_attention")
	}
	window := int64(0)
	for _, s := range sliding {
		if s {
			window = c.sizeOr("sliding_window", 4096)
			break
		}
	}
	roped := c.compassRope(sliding)
	if c.err != nil {
		return nil
	}
	type key struct{ slide, rope bool }
	made := map[key]core.Layer{}
	norm := func(name string) core.Layer { return &nn.CohereNorm{Name: name, Dim: hidden} }
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := key{sliding[i], roped[sliding[i]]}
		if made[k] == nil {
			at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
				Impl: attn, Causal: true, Dropout: drop, SoftmaxFP32: true, EagerMask: true}
			if k.rope {
				at.Rope, at.RopeTables, at.RopeTablesBatch = true, "rotary_emb.full_attention", true
			}
			if k.slide {
				at.Window = window
				if k.rope {
					at.RopeTables = "rotary_emb.sliding_attention"
				}
			}
			c.checkLayer(at, nil)
			mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
			made[k] = res(norm("input_layernorm"), &nn.Parallel{Branches: []core.Layer{at, mlp}})
		}
		blocks[i] = made[k]
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+3*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM && scale != 1 {
		m.LogitScale = 1 / scale // Model.LogitScale divides; the head multiplies
	}
	return m
}

// compassRope reads which layer types rotate (by sliding: false the
// full layers, true the sliding ones): rope_parameters[type] an object,
// or null for none. Every type the layers use needs an entry.
func (c *hfConfig) compassRope(sliding []bool) map[bool]bool {
	out := map[bool]bool{}
	if c.err != nil {
		return out
	}
	rp, ok := c.raw["rope_parameters"].(map[string]any)
	if !ok {
		c.fail("rope_parameters", "must map each attention layer type to its rope parameters or null (got %s): CohereCompassRotaryEmbedding reads rope_parameters[layer_type]", describeJSON(c.raw["rope_parameters"]))
		return out
	}
	for _, s := range sliding {
		typ := map[bool]string{false: "full_attention", true: "sliding_attention"}[s]
		v, set := rp[typ]
		if !set {
			c.fail("rope_parameters", "has no %q entry: CohereCompassRotaryEmbedding reads rope_parameters[layer_type] for each attention layer type (null: no rotary embedding)", typ)
			return out
		}
		if v == nil {
			continue
		}
		p, ok := v.(map[string]any)
		if !ok {
			c.fail("rope_parameters", "%s's entry must be an object or null (got %s)", typ, describeJSON(v))
			return out
		}
		out[s] = true
		if rt, _ := p["rope_type"].(string); rt != "" && rt != "default" && p["partial_rotary_factor"] != nil {
			if n, ok := p["partial_rotary_factor"].(json.Number); !ok || n.String() != "1" && n.String() != "1.0" {
				c.fail("rope_parameters", "%s's partial_rotary_factor (%s) with rope_type %q gives a table narrower than the head, which apply_rotary_pos_emb cannot apply", typ, describeJSON(p["partial_rotary_factor"]), rt)
				return out
			}
		}
	}
	return out
}
