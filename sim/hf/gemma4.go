package hf

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildGemma4 builds Gemma 4's text model as transformers builds it
// (models/gemma4/modeling_gemma4.py, 5.17.0): Gemma4ForCausalLM for
// model_type gemma4_text, and for gemma4 the language model of
// Gemma4ForConditionalGeneration (text_config; model.language_model)
// or, with arch="Gemma4ForCausalLM", the text model alone (model).
//
// Each decoder layer (Gemma4TextDecoderLayer) is
//
//	h = x + post_attention_layernorm(self_attn(input_layernorm(x)))
//	y = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))
//	y = y * layer_scalar                       (a buffer, in place)
//
// with, under enable_moe_block (the 26B A4B), the dense MLP's output
// normed by post_feedforward_layernorm_1 and summed with the experts'
// (nn.Gemma4MoE, which reads h) before post_feedforward_layernorm. The
// norms are Gemma4RMSNorm (nn.Gemma4Norm), the attention nn.Gemma4Attention:
// sliding layers with head_dim and num_key_value_heads, full-attention
// layers (layer_types; by default every sixth, and the last always) with
// global_head_dim and, when attention_k_eq_v, num_global_key_value_heads
// and the key projection reused as the values. The embedding is scaled
// by sqrt(hidden_size); the logits are soft-capped by
// final_logit_softcapping (default none; the released checkpoints set 30).
//
// E2B and E4B add per-layer embeddings (hidden_size_per_layer_input, whose
// default is 256: nn.Gemma4Embed makes the per-layer inputs, each layer
// ends with nn.Gemma4PerLayer) and reuse, in their last
// num_kv_shared_layers layers, the keys and values of the last earlier
// layer of each type (nn.Gemma4Attention's StoreKV and SharedKV; with
// use_double_wide_mlp those layers' MLPs are twice as wide).
//
// Gemma4ForConditionalGeneration's vision tower (vision_config) is
// nn.Gemma4VisionTower, its soft tokens joined after the embeddings
// (gemma4_vision.go); its audio tower (audio_config, E2B and E4B) is
// nn.Gemma4AudioTower, weights only (memsh models no audio input). Not
// modelled, and refused naming the key: attention_bias and
// use_bidirectional_attention "all". With use_bidirectional_attention "vision" (26B A4B,
// 31B) each image's tokens attend to one another in the sliding layers
// (nn.Gemma4Attention's VisionBidir: SDPA's mask there).
func buildGemma4(c *hfConfig, attn string, head hfHead) *core.Model {
	tc := c
	var towers []core.Layer
	causal := strings.HasSuffix(c.arch, "ForCausalLM")
	vl := c.modelType == "gemma4" || c.modelType == "gemma4_unified"
	if c.modelType == "gemma4_unified" {
		towers = gemma4UnifiedTowers(c, causal)
		if c.err != nil {
			return nil
		}
	}
	if c.modelType == "gemma4" {
		if c.has("vision_config") && !causal {
			t := gemma4VisionTower(c, attn)
			if c.err != nil {
				return nil
			}
			towers = append(towers, t)
		}
		if c.has("audio_config") && !causal {
			t := gemma4AudioTower(c)
			if c.err != nil {
				return nil
			}
			towers = append(towers, t)
		}
	}
	if vl {
		tc = c.sub("text_config")
		if c.err != nil {
			return nil
		}
		tc.modelType = c.modelType + "_text"
		tc.classKeys(tc.modelType) // Gemma4TextConfig's or Gemma4UnifiedTextConfig's defaults
	}
	m := tc.gemma4Text(attn, head, c.modelType == "gemma4_unified" && !causal)
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	if vl {
		m.Name = c.name
		m.TieEmbeddings = c.flag("tie_word_embeddings", true)
		switch {
		case len(towers) > 0:
			joinGemma4Towers(m, towers)
		case !causal:
			m.Layers = []core.Layer{&core.Sequential{Name: "language_model", Layers: m.Layers}}
		}
	}
	return m
}

// gemma4Text is Gemma4TextModel with its head, from a Gemma4TextConfig
// (or Gemma4UnifiedTextModel, from a Gemma4UnifiedTextConfig: model type
// gemma4_unified_text). unifiedVL: the text model of
// Gemma4UnifiedForConditionalGeneration, whose masks are never left to
// SDPA's is_causal under use_bidirectional_attention "vision"
// (nn.Gemma4Attention.MaskAlways).
func (c *hfConfig) gemma4Text(attn string, head hfHead, unifiedVL bool) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.sizeOr("head_dim", 256)
	ghd := c.sizeOr("global_head_dim", 512)
	kEqV := c.flag("attention_k_eq_v", false)
	gkv := kv
	if kEqV && c.has("num_global_key_value_heads") {
		gkv = c.kvHeads("num_global_key_value_heads", heads)
	}
	unified := c.modelType == "gemma4_unified_text" // gemma4_unified.go: no per-layer embeddings, no MoE block
	window := c.sizeOr("sliding_window", 512)
	if unified {
		window = c.sizeOr("sliding_window", 1024) // Gemma4UnifiedTextConfig's default
	}
	act := c.mlpAct("hidden_activation", "gelu_pytorch_tanh", true)
	drop := c.prob("attention_dropout", 0)
	logitCap := c.softcap("final_logit_softcapping", 0)
	tie := c.flag("tie_word_embeddings", true)
	c.object("rope_parameters")
	ple := int64(0)
	if !unified {
		ple = c.intOr("hidden_size_per_layer_input", 256)
	}
	pleVocab := int64(0)
	if ple > 0 {
		pleVocab = c.sizeOr("vocab_size_per_layer_input", 262144)
	}
	nShared := c.intOr("num_kv_shared_layers", 0)
	doubleWide := c.flag("use_double_wide_mlp", false)
	gateAct := map[string]string{"geglu": "gelu", "swiglu": "silu"}[act] // per_layer_input_gate's act_fn, hidden_activation
	if c.flag("attention_bias", false) {
		c.fail("attention_bias", "is not modelled for Gemma 4 (got true; the released models have none)")
	}
	mode := ""
	if unified && !c.null("use_bidirectional_attention") {
		mode = "vision" // Gemma4UnifiedTextConfig's default (null: none)
	}
	mode = c.str("use_bidirectional_attention", mode)
	if mode == "all" {
		c.fail("use_bidirectional_attention", `"all" (bidirectional text attention) is not modelled; null and "vision" are`)
	}
	types := c.gemma4LayerTypes(layers)
	store, shared := c.gemma4SharedKV(types, nShared)
	moe := !unified && c.flag("enable_moe_block", false)
	estimateFF := 3 * float64(hidden) * float64(inter)
	var experts *nn.Gemma4MoE
	if moe {
		experts = &nn.Gemma4MoE{Dim: hidden, Hidden: c.size("moe_intermediate_size"), Experts: c.size("num_experts"),
			TopK: c.size("top_k_experts"), Act: act}
		c.checkLayer(experts, moeKeys("num_experts", "top_k_experts"))
		estimateFF += 3 * float64(hidden) * float64(experts.Hidden) * float64(experts.Experts)
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*ghd)+2*estimateFF+float64(pleVocab+hidden)*float64(ple)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Gemma4Norm{Name: name, Dim: hidden} }
	ff := func(inter int64) core.Layer {
		mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
		if !moe {
			return res(norm("pre_feedforward_layernorm"), mlp, norm("post_feedforward_layernorm"))
		}
		return res(&nn.Parallel{Branches: []core.Layer{seq(norm("pre_feedforward_layernorm"), mlp, norm("post_feedforward_layernorm_1")), experts}},
			norm("post_feedforward_layernorm"))
	}
	type kind struct{ full, store, shared bool }
	built := map[kind]core.Layer{}
	block := func(k kind) core.Layer {
		if b, ok := built[k]; ok {
			return b
		}
		a := &nn.Gemma4Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HD: hd, Impl: attn, Window: window, Dropout: drop,
			EnableGQA: true, KV: "sliding_attention", StoreKV: k.store, SharedKV: k.shared, VisionBidir: mode == "vision", RopeTables: "rotary_emb",
			EagerMask: true, MaskAlways: unifiedVL && mode == "vision"}
		if k.full {
			a.HD, a.KVHeads, a.KEqV, a.Window, a.KV = ghd, gkv, kEqV, 0, "full_attention"
		}
		c.checkLayer(a, nil) // the kernel's check names attn=
		width := inter
		if k.shared && doubleWide {
			width *= 2 // Gemma4TextMLP: use_double_wide_mlp on the kv-shared layers
		}
		parts := []core.Layer{res(norm("input_layernorm"), a, norm("post_attention_layernorm")), ff(width)}
		if ple > 0 {
			parts = append(parts, res(&nn.Gemma4PerLayer{Dim: hidden, PLE: ple, Act: gateAct}))
		}
		built[k] = seq(parts...)
		return built[k]
	}
	blocks := make([]core.Layer, layers)
	for i, t := range types {
		blocks[i] = block(kind{t, store[i], shared[i]})
	}
	var front []core.Layer
	if ple > 0 {
		front = []core.Layer{&nn.Gemma4Embed{Vocab: vocab, Dim: hidden, PLEVocab: pleVocab, PLE: ple, Layers: layers}}
	} else {
		front = []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
			gemmaEmbedScale(hidden)}
	}
	ls := append(front, stackBlocks("layers", blocks), norm("norm"))
	m := c.finish(head, ls, vocab, tie)
	if head == headCausalLM {
		m.LogitSoftcap = logitCap
	}
	return m
}

// gemma4LayerTypes is which layers attend fully: layer_types
// ("sliding_attention" / "full_attention"), else every sixth layer; the
// last layer always (Gemma4TextConfig.__post_init__ forces it, with a
// warning).
func (c *hfConfig) gemma4LayerTypes(layers int64) []bool {
	var full []bool
	if c.has("layer_types") {
		full = c.layerTypes(layers, "full_attention", "sliding_attention")
	} else {
		full = make([]bool, max(layers, 0))
		for i := range full {
			full[i] = (i+1)%6 == 0
		}
	}
	if layers > 0 {
		full[layers-1] = true
	}
	return full
}

// gemma4SharedKV is which layers leave their keys and values (store) and
// which reuse them (shared): the last n layers reuse those of the last
// earlier layer of their type (Gemma4TextAttention's is_kv_shared_layer
// and store_full_length_kv).
func (c *hfConfig) gemma4SharedKV(full []bool, n int64) (store, shared []bool) {
	layers := int64(len(full))
	store, shared = make([]bool, layers), make([]bool, layers)
	if n == 0 || c.err != nil {
		return store, shared
	}
	if n >= layers {
		c.fail("num_kv_shared_layers", "(%d) must leave a layer before the shared ones (%d layers)", n, layers)
		return store, shared
	}
	first := layers - n
	for i := first; i < layers; i++ {
		shared[i] = true
	}
	for _, t := range []bool{false, true} {
		last := int64(-1)
		for i := int64(0); i < first; i++ {
			if full[i] == t {
				last = i
			}
		}
		for i := first; i < layers; i++ {
			if full[i] == t && last < 0 {
				c.fail("num_kv_shared_layers", "(%d) leaves no earlier layer of the type of layer %d to share keys and values with", n, i)
				return store, shared
			}
		}
		if last >= 0 {
			store[last] = true
		}
	}
	return store, shared
}
