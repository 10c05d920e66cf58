package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildMiMoV2Flash builds transformers' MiMoV2FlashForCausalLM
// (model_type mimo_v2_flash: Xiaomi's MiMo-V2-Flash;
// models/mimo_v2_flash/modular_mimo_v2_flash.py at 5.25.0). Its decoder
// layer is GLM-4.7-Flash's pre-norm one (input_layernorm,
// post_attention_layernorm, Llama's RMSNorm) around MiMoV2FlashAttention
// and an MLP:
//
//   - the attention (nn.Attention with VHeadDim, VScale and MaxShift,
//     attention_value_head.go): num_attention_heads query heads of
//     head_dim (default 192) over num_key_value_heads, twice as many on
//     the layers layer_types calls "sliding_attention" (default: all but
//     layer 0 and every sixth), whose queries see the last sliding_window
//     keys (a sliding_window_size key is read as sliding_window - 1, as
//     MiMoV2FlashConfig reads it) and whose softmax has a sink a head;
//     v heads of v_head_dim (default 128), v times attention_value_scale;
//     q, k and v biased by attention_bias, o_proj never; each layer type
//     its own rotary pair over rope_parameters[type]'s
//     partial_rotary_factor of the head (default 0.334: 64 of 192 dims),
//     ending in a cat of the rotated and passed dims (RopeCat). Eager
//     only: MiMoV2FlashPreTrainedModel has no SDPA path, and its flash
//     one is FlashAttention 4's alone;
//   - the MLP: Glm4MoeMLP of intermediate_size where mlp_layer_types says
//     "dense" (default: layer 0), else DeepSeek-V3's MoE without shared
//     experts (MiMoV2FlashMoE deletes them): the sigmoid router over fp32
//     logits with e_score_correction_bias, n_routed_experts 3-D experts
//     of moe_intermediate_size.
//
// The checkpoints' MTP layers (model.mtp.*) are not built by transformers
// (_keys_to_ignore_on_load_unexpected): mtp=True is refused.
func buildMiMoV2Flash(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.size("head_dim")
	vd := c.size("v_head_dim")
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	bias := c.flag("attention_bias", false)
	pa := c.prob("attention_dropout", 0)
	c.number("attention_value_scale", 0.707)
	if c.mtp && c.err == nil {
		c.err = &units.Error{Msg: "mtp=True is not modelled for model_type mimo_v2_flash: transformers does not build its checkpoints' MTP layers (model.mtp.*, _keys_to_ignore_on_load_unexpected)",
			Hint: "leave mtp out"}
	}
	sliding := make([]bool, max(layers, 0))
	if c.has("layer_types") {
		sliding = c.layerTypes(layers, "sliding_attention", "full_attention")
	} else {
		for i := range sliding {
			sliding[i] = i != 0 && (i+1)%6 != 0 // MiMoV2FlashConfig.__post_init__
		}
	}
	window := c.mimoWindow()
	width := c.mimoRope(hd, sliding)
	moe := c.routedMoE(hidden, c.size("moe_intermediate_size"), c.size("n_routed_experts"), 0, act)
	c.checkLayer(moe, moeKeys("n_routed_experts", "num_experts_per_tok"))
	sparse := c.sparseLayers(layers, 1)
	if c.err != nil {
		return nil
	}
	attns := map[bool]*nn.Attention{}
	for _, slide := range []bool{false, true} {
		a := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, VHeadDim: vd,
			QKVBias: bias, Impl: attn, Causal: true, Rope: true, RopeTables: "rotary_emb", RopeTablesDim: width[false],
			RopeCat: true, EagerMask: true, VScale: true, MaxShift: true, Dropout: pa, ProbsDropoutOnly: true}
		if slide {
			a.KVHeads, a.Window, a.Sinks = 2*kv, window, true
			a.RopeTables, a.RopeTablesDim = "rotary_emb_sliding", width[true]
		}
		c.checkLayer(a, nil)
		attns[slide] = a
	}
	estimate := 2 * float64(vocab) * float64(hidden)
	for i := range sliding {
		a := attns[sliding[i]]
		ff := 3 * float64(hidden) * float64(inter)
		if sparse[i] {
			ff = 3 * float64(hidden) * float64(moe.Experts*moe.Hidden)
		}
		estimate += float64(a.Params()) + ff
	}
	c.checkTotal(estimate)
	if c.err != nil {
		return nil
	}
	dense := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	blocks := windowedMoEBlocks(sliding, sparse, attns, dense, moe, norm)
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// mimoWindow is the sliding layers' window: sliding_window (default 129),
// or sliding_window_size + 1 where config.json sets that
// (MiMoV2FlashConfig.__post_init__: "the reference SGLang implementation
// attends to sliding_window_size previous tokens plus the query").
func (c *hfConfig) mimoWindow() int64 {
	if c.has("sliding_window_size") {
		return c.size("sliding_window_size") + 1
	}
	return c.size("sliding_window")
}

// mimoRope is the width of each layer type's rotary pair:
// rope_parameters[type]'s partial_rotary_factor of the head,
// MiMoV2FlashConfig's 0.334 for both types when rope_parameters is
// absent, and MiMoV2FlashRotaryEmbedding's 0.334 for an entry of rope
// type "default" without one (compute_default_rope_parameters); the other
// rope types' initialisers default the factor to 1 (modeling_rope_utils),
// so an entry of another type must name its factor.
func (c *hfConfig) mimoRope(hd int64, sliding []bool) map[bool]int64 {
	if rp, ok := c.raw["rope_parameters"].(map[string]any); ok {
		for _, name := range []string{"full_attention", "sliding_attention"} {
			p, _ := rp[name].(map[string]any)
			if t, _ := p["rope_type"].(string); t != "" && t != "default" && p["partial_rotary_factor"] == nil {
				c.fail("rope_parameters", "%s's rope_type %q needs its partial_rotary_factor: its initialiser defaults it to 1, MiMo-V2-Flash's default rotary to 0.334", name, t)
				return nil
			}
		}
	}
	return c.typeRope(hd, sliding, map[bool]float64{false: 0.334, true: 0.334}, 0.334, "MiMoV2FlashRotaryEmbedding")
}
