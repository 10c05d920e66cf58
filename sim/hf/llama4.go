package hf

import (
	"encoding/json"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildLlama4 builds transformers' Llama4ForCausalLM (model_type
// llama4_text, or the text_config of llama4: Llama 4 Scout 17B-16E,
// Maverick 17B-128E; models/llama4/modeling_llama4.py, first in the
// 4.51.0 wheel, absent from 4.50.3), as the 5.17.0 and 5.25.0 wheels run
// it:
//
//   - feed_forward is Llama4TextMoe on the moe_layers (default every
//     interleave_moe_layer_step-th layer, from layer step-1): a top-k
//     sigmoid router (an nn.Linear), a shared_expert MLP and
//     num_local_experts routed experts of intermediate_size stored as 3-D
//     gate_up_proj [experts, hidden, 2 x intermediate] and down_proj,
//     which run every expert on every token (nn.MoEDenseBMM); elsewhere a
//     gated MLP of intermediate_size_mlp.
//   - no_rope_layers (1: RoPE; default every no_rope_layer_interval-th
//     layer, 4, is NoPE) pick the rotated layers; their attention is
//     chunked (attention_chunk_size; layer_types when given) and, with
//     use_qk_norm, L2-normed after the rotation; the NoPE layers attend to
//     everything, q temperature-tuned when attn_temperature_tuning.
//   - the eager softmax stays in the scores' dtype (Llama 4's
//     eager_attention_forward, unlike Llama's); there is no flash path
//     (Llama4PreTrainedModel._supports_flash_attn = False).
//
// Llama4ForConditionalGeneration (the llama4 checkpoints' class, the
// default for model_type llama4) adds the vision model and projector
// (llama4_vision.go); arch="Llama4ForCausalLM" builds the text model alone
// from the same config.json.
func buildLlama4(c *hfConfig, attn string, head hfHead) *core.Model {
	tc := c
	vision := false
	if c.modelType == "llama4" {
		vision = c.arch == "" || strings.HasSuffix(c.arch, "ForConditionalGeneration")
		tc = c.sub("text_config")
		if c.err != nil {
			return nil
		}
		tc.classKeys("llama4_text") // Llama4TextConfig's defaults
		tc.arch = c.arch
	}
	m := tc.llama4Text(attn, head)
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	if m != nil && tc != c {
		m.Name = c.name
	}
	if m != nil && vision {
		return buildLlama4Vision(c, tc, m, attn)
	}
	return m
}

func (c *hfConfig) llama4Text(attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	hd := c.headDim("hidden_size", "num_attention_heads", 128) // Llama4TextConfig's head_dim
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	bias := c.flag("attention_bias", false)
	qkNorm := c.flag("use_qk_norm", true)
	temp := c.flag("attn_temperature_tuning", true)
	drop := c.prob("attention_dropout", 0)
	chunk := c.sizeOr("attention_chunk_size", 8192)
	experts := c.sizeOr("num_local_experts", 16)
	topK := c.sizeOr("num_experts_per_tok", 1)
	inter := c.size("intermediate_size")
	c.object("rope_scaling")
	if c.err != nil {
		return nil
	}
	rope := c.llama4Rope(layers)
	chunked := c.llama4Chunked(layers, rope)
	moe := c.llama4MoELayers(layers)
	interMLP := int64(0)
	for i := int64(0); i < layers; i++ {
		if !moe[i] {
			interMLP = c.sizeOr("intermediate_size_mlp", 16384)
			break
		}
	}
	c.checkTotal(float64(layers)*(float64(experts+1)*3*float64(hidden)*float64(inter)+4*float64(hidden)*float64(heads*hd)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	moeFF := &nn.MoE{Name: "feed_forward", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: act,
		SharedExperts: 1, SharedHidden: inter, SharedName: "shared_expert",
		Impl: nn.MoEDenseBMM, Router: nn.RouterTopKSigmoid, RouterName: "router"}
	c.checkLayer(moeFF, moeKeys("num_local_experts", "num_experts_per_tok"))
	var denseFF core.Layer
	if interMLP > 0 {
		denseFF = &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: interMLP, Act: act}
	}
	type key struct{ rope, chunked, moe bool }
	made := map[key]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := key{rope[int64(i)], chunked[int64(i)], moe[int64(i)]}
		if b, ok := made[k]; ok {
			blocks[i] = b
			continue
		}
		at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
			QKVBias: bias, OutBias: bias, Impl: attn, Causal: true, Dropout: drop,
			Rope: k.rope, RopeComplex: k.rope, QKL2Norm: qkNorm && k.rope, TempTuning: temp && !k.rope}
		if k.chunked {
			at.Chunk = chunk
		}
		ff := denseFF
		if k.moe {
			ff = moeFF
		}
		made[k] = seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), ff))
		blocks[i] = made[k]
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// llama4Rope is no_rope_layers (1: the layer uses RoPE), or when absent or
// empty Llama4TextConfig's default: every no_rope_layer_interval-th layer
// (default 4) is NoPE.
func (c *hfConfig) llama4Rope(layers int64) map[int64]bool {
	out := map[int64]bool{}
	list, _ := c.raw["no_rope_layers"].([]any)
	if c.has("no_rope_layers") && list == nil {
		c.fail("no_rope_layers", "must be a list of 0 and 1, one per layer (got %s)", describeJSON(c.raw["no_rope_layers"]))
		return out
	}
	if len(list) == 0 {
		every := max(c.sizeOr("no_rope_layer_interval", 4), 1) // below 1: c.err's already, read back as 0
		for i := int64(0); i < layers; i++ {
			out[i] = (i+1)%every != 0
		}
		return out
	}
	if int64(len(list)) != layers {
		c.fail("no_rope_layers", "must list one 0 or 1 per layer (%d; got %d)", layers, len(list))
		return out
	}
	for i, v := range list {
		n, ok := v.(json.Number)
		if !ok || (n.String() != "0" && n.String() != "1") {
			c.fail("no_rope_layers", "must hold 0 (NoPE) or 1 (RoPE) per layer (got %s)", describeJSON(v))
			return out
		}
		out[int64(i)] = n.String() == "1"
	}
	return out
}

// llama4Chunked is layer_types ("chunked_attention" / "full_attention")
// when given, else the RoPE layers (Llama4TextConfig.__post_init__).
func (c *hfConfig) llama4Chunked(layers int64, rope map[int64]bool) map[int64]bool {
	if !c.has("layer_types") {
		return rope
	}
	out := map[int64]bool{}
	for i, on := range c.layerTypes(layers, "chunked_attention", "full_attention") {
		if on {
			out[int64(i)] = true
		}
	}
	return out
}

// llama4MoELayers is moe_layers, or when absent or null every
// interleave_moe_layer_step-th layer from step-1 (an empty list: none).
func (c *hfConfig) llama4MoELayers(layers int64) map[int64]bool {
	if c.has("moe_layers") {
		return c.intList("moe_layers", layers)
	}
	step := max(c.sizeOr("interleave_moe_layer_step", 1), 1) // below 1: c.err's already, read back as 0 (a loop that never ended)
	out := map[int64]bool{}
	for i := step - 1; i < layers; i += step {
		out[i] = true
	}
	return out
}
