package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildLaguna builds transformers' LagunaForCausalLM (model_type laguna:
// poolside's Laguna XS.2; models/laguna, 5.25.0). Its decoder layer is
// GLM-4.7-Flash's pre-norm one (input_layernorm, post_attention_layernorm,
// Llama's RMSNorm) around LagunaAttention and an MLP:
//
//   - the attention: num_attention_heads_per_layer[i] query heads (default
//     num_attention_heads in every layer) of head_dim (default 128) over
//     num_key_value_heads, q and k normed per head by Llama's RMSNorm
//     before the rope, every projection biased by attention_bias, the
//     layers layer_types calls "sliding_attention" attending to the last
//     sliding_window keys; each layer type has its own rotary tables
//     (LagunaRotaryEmbedding: rope_parameters[type]'s partial_rotary_factor
//     of each head, by default 0.5 for full_attention and 1 for
//     sliding_attention), and apply_rotary_pos_emb ends in a cat of the
//     rotated and passed dims (RopeCat) whatever the factor; the output
//     is gated by softplus(g_proj(x)) per head (gating true or
//     "per-head") or per channel ("per-element"; nn.Attention.GateSoftplus);
//   - the MLP: Qwen2-MoE's of intermediate_size where mlp_layer_types says
//     "dense" (default: layer 0), else LagunaSparseMoeBlock: its
//     shared_experts MLP of shared_expert_intermediate_size first, then
//     mlp.gate (F.linear in the activations' dtype, the logits upcast,
//     a sigmoid, the top num_experts_per_tok of the scores plus the
//     e_score_correction_bias parameter without gradient, renormalised and
//     cast back to the activations' dtype), num_experts 3-D experts of
//     moe_intermediate_size run by experts_implementation, their output
//     times moe_routed_scaling_factor, plus the shared output.
//
// moe_router_logit_softcapping above 0 (a tanh on the logits that memsh
// does not model) and moe_apply_router_weight_on_input (LagunaConfig
// refuses it) are refused.
func buildLaguna(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 128)
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	bias := c.flag("attention_bias", false)
	pa := c.prob("attention_dropout", 0)
	perHead := c.lagunaGating()
	if c.flag("moe_apply_router_weight_on_input", false) {
		c.fail("moe_apply_router_weight_on_input", "must be false: LagunaConfig.validate_architecture refuses it (NotImplementedError in transformers 5.25.0)")
	}
	if f := c.number("moe_router_logit_softcapping", 0); c.err == nil && f != 0 {
		c.fail("moe_router_logit_softcapping", "(%g) is not modelled for model_type laguna (a tanh on the router logits); set it to 0.0", f)
	}
	c.number("moe_routed_scaling_factor", 1)
	sliding := make([]bool, max(layers, 0))
	if c.has("layer_types") {
		sliding = c.layerTypes(layers, "sliding_attention", "full_attention")
	}
	headsAt := c.lagunaHeads(layers, heads)
	window := int64(0)
	for _, s := range sliding {
		if s {
			window = c.sizeOr("sliding_window", 512)
			break
		}
	}
	width := c.lagunaRope(hd, sliding)
	moeInter := c.sizeOr("moe_intermediate_size", 512)
	moe := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: moeInter, Experts: c.sizeOr("num_experts", 256), TopK: c.sizeOr("num_experts_per_tok", 8), Act: act,
		Router: nn.RouterSigmoid, SigmoidLogitsFP32: true, NormTopK: true, WeightsHidden: true,
		ScoreBias: true, ScoreBiasParam: true,
		SharedExperts: 1, SharedHidden: c.sizeOr("shared_expert_intermediate_size", 512), SharedFirst: true, RoutedScale: true}
	c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
	sparse := c.sparseLayers(layers, 1)
	if c.err != nil {
		return nil
	}
	type attnKey struct {
		heads int64
		slide bool
	}
	attns := map[attnKey]*nn.Attention{}
	attnAt := func(i int) *nn.Attention {
		k := attnKey{headsAt[i], sliding[i]}
		if a := attns[k]; a != nil {
			return a
		}
		a := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: k.heads, KVHeads: kv, HeadDim: hd,
			QKVBias: bias, OutBias: bias, QKNorm: true, Impl: attn, Causal: true, Rope: true, SoftmaxFP32: true,
			RopeTables: "rotary_emb", RopeTablesDim: width[false], RopeCat: true, EagerMask: true,
			GateSoftplus: true, GatePerHead: perHead, Dropout: pa, ProbsDropoutOnly: pa > 0}
		if k.slide {
			a.Window, a.RopeTables, a.RopeTablesDim = window, "rotary_emb_sliding", width[true]
		}
		c.checkLayer(a, nil)
		attns[k] = a
		return a
	}
	estimate := 2 * float64(vocab) * float64(hidden)
	for i := range headsAt {
		estimate += 2*float64(hidden)*float64((headsAt[i]+kv)*hd) + float64(hidden)*float64(headsAt[i]*hd) +
			3*float64(hidden)*float64(max(inter, moe.Experts*moeInter))
	}
	c.checkTotal(estimate)
	if c.err != nil {
		return nil
	}
	dense := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	type blockKey struct {
		at     *nn.Attention
		sparse bool
	}
	made := map[blockKey]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := blockKey{attnAt(i), sparse[i]}
		if made[k] == nil {
			ff := core.Layer(dense)
			if k.sparse {
				ff = moe
			}
			made[k] = seq(res(norm("input_layernorm"), k.at), res(norm("post_attention_layernorm"), ff))
		}
		blocks[i] = made[k]
	}
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// lagunaGating reads gating: true or "per-head" gate each head, false or
// "per-element" each channel (LagunaAttention: gate_per_head = gating is
// True or gating == "per-head", anything else per element); another
// string is refused.
func (c *hfConfig) lagunaGating() bool {
	v, set := c.raw["gating"]
	if !set {
		return true
	}
	switch v {
	case true, "per-head":
		return true
	case false, "per-element":
		return false
	}
	c.fail("gating", "must be true or \"per-head\" (a gate a head), false or \"per-element\" (a gate a channel) (got %s): LagunaAttention always gates its output", describeJSON(v))
	return true
}

// lagunaHeads is each layer's query heads: num_attention_heads_per_layer,
// else num_attention_heads in every layer.
func (c *hfConfig) lagunaHeads(layers, heads int64) []int64 {
	out := make([]int64, max(layers, 0))
	for i := range out {
		out[i] = heads
	}
	raw, set := c.raw["num_attention_heads_per_layer"]
	if !set || raw == nil {
		return out
	}
	list, ok := raw.([]any)
	if !ok || int64(len(list)) != layers {
		c.fail("num_attention_heads_per_layer", "must list the query heads of each of the %d layers", layers)
		return out
	}
	for i, v := range list {
		n, ok := v.(json.Number)
		h, err := n.Int64()
		if !ok || err != nil || h <= 0 {
			c.fail("num_attention_heads_per_layer", "layer %d's heads must be a positive count (got %s)", i, describeJSON(v))
			return out
		}
		out[i] = h
	}
	return out
}

// lagunaRope is the width of each layer type's rotary tables (sliding or
// not): rope_parameters[type]'s partial_rotary_factor (default 1) of the
// head, LagunaConfig's defaults (full_attention 0.5, sliding_attention 1)
// when rope_parameters is absent. A type the layers use that
// rope_parameters does not name is refused, as LagunaRotaryEmbedding
// fails on it.
func (c *hfConfig) lagunaRope(hd int64, sliding []bool) map[bool]int64 {
	return c.typeRope(hd, sliding, map[bool]float64{false: 0.5, true: 1}, 1, "LagunaRotaryEmbedding")
}

// typeRope is the width of each layer type's rotary tables (sliding or
// not) where the rotary embedding (cls) makes one pair a layer type from
// rope_parameters[type]: its partial_rotary_factor (unset when an entry
// has none) of the head, the class's defaults (def) when rope_parameters
// is absent. A type the layers use that rope_parameters does not name is
// refused, as cls fails on it.
func (c *hfConfig) typeRope(hd int64, sliding []bool, def map[bool]float64, unset float64, cls string) map[bool]int64 {
	out := map[bool]int64{false: ropeWidth(hd, def[false]), true: ropeWidth(hd, def[true])}
	raw, set := c.raw["rope_parameters"]
	if !set || raw == nil {
		return out
	}
	rp, ok := raw.(map[string]any)
	if !ok {
		c.fail("rope_parameters", "must map each layer type to its rope parameters (got %s)", describeJSON(raw))
		return out
	}
	used := map[bool]bool{}
	for _, s := range sliding {
		used[s] = true
	}
	for slide, name := range map[bool]string{false: "full_attention", true: "sliding_attention"} {
		if !used[slide] {
			continue
		}
		p, ok := rp[name].(map[string]any)
		if !ok {
			c.fail("rope_parameters", "has no %q entry: %s reads rope_parameters[layer_type] for each layer type", name, cls)
			return out
		}
		f := unset
		if v, set := p["partial_rotary_factor"]; set && v != nil {
			n, ok := v.(json.Number)
			x, err := n.Float64()
			if !ok || err != nil || x <= 0 || x > 1 {
				c.fail("rope_parameters", "%s's partial_rotary_factor must be in (0, 1] (got %s)", name, describeJSON(v))
				return out
			}
			f = x
		}
		out[slide] = ropeWidth(hd, f)
	}
	return out
}
