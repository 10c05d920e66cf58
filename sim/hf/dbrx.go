package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildDbrx builds transformers' DbrxForCausalLM (model_type dbrx:
// Databricks' DBRX; models/dbrx/modeling_dbrx.py and
// configuration_dbrx.py, 5.25.0). The sizes are DbrxConfig's own keys
// (d_model, n_heads, n_layers, vocab_size) and two nested objects,
// attn_config (kv_n_heads, default 1; clip_qkv; attn_pdrop) and
// ffn_config (ffn_hidden_size 3584, moe_num_experts 4, moe_top_k 1,
// ffn_act_fn {"name": "silu"}, moe_jitter_eps, moe_normalize_expert_weights
// 1.0 by default). Each DbrxBlock is
//
//	resid, h = norm_attn_norm(x)   # x + attn(norm_1(x)), then norm_2 of it
//	out = resid + ffn(h)
//
// with bias-free LayerNorms (norm_1, norm_2, norm_f), DbrxAttention's
// fused Wqkv (no bias) clamped to clip_qkv (nn.Attention.ClampQKV), rotary
// q and k, out_proj; and DbrxFFN: router.layer, an nn.Linear, then a
// softmax over the experts in the logits' dtype, top-k, the weights
// divided by their moe_normalize_expert_weights-norm (torch.norm keeps
// the same two tensors a sum's renormalisation does; null: none), and
// DbrxExperts' own loop over w1, v1 and w2 (nn.MoE.GLUParams,
// sim/nn/moe_dbrx.go; experts_implementation does not reach it, so
// experts= is refused). moe_jitter_eps, 0.0 included, multiplies the
// router's input by noise in training (nn.MoE.Jitter). resid_pdrop drops
// the attention's and the FFN's outputs (functional dropout); emb_pdrop is
// read and never applied (DbrxModel.forward). wte and lm_head are untied
// (DbrxConfig.validate_architecture refuses tie_word_embeddings).
func buildDbrx(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("d_model")
	heads := c.size("n_heads")
	layers := c.size("n_layers")
	vocab := c.size("vocab_size")
	po := c.prob("resid_pdrop", 0)
	c.prob("emb_pdrop", 0) // read by DbrxModel, applied nowhere
	if c.flag("tie_word_embeddings", false) && c.err == nil {
		c.err = &units.Error{Msg: fmt.Sprintf("%q = true: DBRX has no tied embeddings (DbrxConfig.validate_architecture raises \"tie_word_embeddings is not supported for DBRX models\")", c.at("tie_word_embeddings")),
			Hint: `set "tie_word_embeddings": false, as DBRX's checkpoints do`}
	}
	if heads > 0 && hidden%heads != 0 && c.err == nil {
		c.fail("d_model", "(%d) must be a multiple of n_heads (%d): DbrxAttention's head_dim is d_model // n_heads", hidden, heads)
	}
	ac, fc := c.dbrxSub("attn_config"), c.dbrxSub("ffn_config")
	kv := ac.sizeOr("kv_n_heads", 1)
	pa := ac.prob("attn_pdrop", 0)
	clip := ac.dbrxClip()
	inter := fc.sizeOr("ffn_hidden_size", 3584)
	experts := fc.sizeOr("moe_num_experts", 4)
	topK := fc.sizeOr("moe_top_k", 1)
	act := "swiglu"
	if fc.has("ffn_act_fn") {
		af := fc.dbrxSub("ffn_act_fn")
		act = af.mlpAct("name", "silu", true)
		if af.err != nil && fc.err == nil {
			fc.err = af.err
		}
	}
	jitter := fc.has("moe_jitter_eps")
	if jitter {
		fc.number("moe_jitter_eps", 0)
	}
	norm := !fc.null("moe_normalize_expert_weights")
	if norm {
		if p := fc.number("moe_normalize_expert_weights", 1); !(p > 0) && fc.err == nil {
			fc.fail("moe_normalize_expert_weights", "must be a positive norm order, or null for none (got %g)", p)
		}
	}
	for _, s := range []*hfConfig{ac, fc} {
		if s.err != nil && c.err == nil {
			c.err = s.err
		}
	}
	if c.err == nil && kv > 0 && heads%kv != 0 {
		ac.fail("kv_n_heads", "(%d) must divide the %d attention heads", kv, heads)
		c.err = ac.err
	}
	if c.err != nil {
		return nil
	}
	hd := hidden / heads
	at := &nn.Attention{Name: "norm_attn_norm.attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		Impl: attn, Causal: true, Dropout: pa, ProbsDropoutOnly: true, Rope: true, FusedQKV: true, RepeatKV: true,
		ClampQKV: clip > 0, QKVName: "Wqkv", OutName: "out_proj", SoftmaxFP32: true, EagerMask: true, RopeTables: "rotary_emb"}
	moe := &nn.MoE{Name: "ffn", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: act,
		Impl: nn.MoEFusedLoop, GLUParams: true, LinearRouter: true, RouterName: "router.layer", SoftmaxInDType: true,
		NormTopK: norm, Jitter: jitter}
	fc.checkLayer(moe, moeKeys("moe_num_experts", "moe_top_k"))
	if fc.err != nil {
		c.err = fc.err
		return nil
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+3*float64(experts)*float64(hidden)*float64(inter)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ln := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden} }
	attnPart := []core.Layer{ln("norm_attn_norm.norm_1"), at}
	ffnPart := []core.Layer{ln("norm_attn_norm.norm_2"), moe}
	if po > 0 { // nn.functional.dropout(hidden_states, p=resid_pdrop): no module
		attnPart = append(attnPart, &nn.Dropout{P: po})
		ffnPart = append(ffnPart, &nn.Dropout{P: po})
	}
	block := seq(res(attnPart...), res(ffnPart...))
	ls := []core.Layer{&nn.Embedding{Name: "wte", Rows: vocab, Dim: hidden},
		&core.Repeat{Name: "blocks", Layer: block, N: layers}, ln("norm_f")}
	return c.finish(head, ls, vocab, false)
}

// dbrxSub reads DBRX's nested attn_config, ffn_config or ffn_act_fn:
// absent or null is DbrxAttentionConfig's or DbrxFFNConfig's defaults
// (an empty object), anything but an object an error naming the key.
func (c *hfConfig) dbrxSub(key string) *hfConfig {
	if !c.has(key) {
		return &hfConfig{raw: map[string]any{}, modelType: c.modelType, name: c.name, prefix: c.at(key) + "."}
	}
	if _, ok := c.raw[key].(map[string]any); !ok {
		c.fail(key, "must be an object (got %s)", describeJSON(c.raw[key]))
		return &hfConfig{raw: map[string]any{}, modelType: c.modelType, name: c.name, prefix: c.at(key) + ".", err: c.err}
	}
	return c.sub(key)
}

// dbrxClip reads attn_config's clip_qkv, which transformers 5.25.0 needs
// set: DbrxAttention.forward calls qkv_states.clamp(min=None, max=None)
// without it, and torch.clamp raises "At least one of 'min' or 'max'
// must not be None" (torch 2.15.0), so no such model trains.
func (c *hfConfig) dbrxClip() float64 {
	if !c.has("clip_qkv") {
		if c.err == nil {
			c.err = &units.Error{Msg: fmt.Sprintf("%q is null or absent: transformers 5.25.0's DbrxAttention clamps q, k and v with clip_qkv whatever it is, and torch.clamp refuses two None bounds, so this DBRX cannot train", c.at("clip_qkv")),
				Hint: `DBRX's checkpoints set "clip_qkv": 8; set it (any positive bound) to count the model`}
		}
		return 0
	}
	v := c.number("clip_qkv", 0)
	if !(v > 0) && c.err == nil {
		c.fail("clip_qkv", "must be a positive bound (got %g)", v)
	}
	return v
}

// setDbrxSentinels sets what DbrxExperts' one_hot counts: num_experts + 1
// classes from 5.18 (sentinelsEPSince: the 5.18.0 wheel's
// modeling_dbrx.py), num_experts before (5.15.0 to 5.17.0, read);
// nn.MoE.SentinelsEP.
func setDbrxSentinels(layers []core.Layer, on bool) {
	for _, l := range layers {
		if m, ok := l.(*nn.MoE); ok {
			m.SentinelsEP = on
		}
		setDbrxSentinels(l.Children(), on)
	}
}
