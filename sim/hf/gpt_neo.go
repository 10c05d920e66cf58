package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildGPTNeo follows transformers' GPTNeoForCausalLM (model_type gpt_neo:
// EleutherAI's GPT-Neo 125M, 1.3B and 2.7B; models/gpt_neo/modeling_gpt_neo.py
// and configuration_gpt_neo.py at 5.25.0): GPT-2's layout (gpt2Stack:
// transformer.wte plus the learned positions wpe, drop, h: x +
// attn(ln_1(x)); x + mlp(ln_2(x)), ln_f, lm_head tied to wte) with
// nn.Linear projections: attn.attention's q_proj, k_proj and v_proj
// unbiased, out_proj biased, then resid_dropout; the MLP's c_fc and c_proj
// biased, activation_function (gelu_new) between them, resid_dropout after.
// attention_dropout drops the probabilities, embed_dropout the embeddings.
//
// GPTNeoSelfAttention has no SDPA path (GPTNeoPreTrainedModel sets no
// _supports_sdpa: attn="sdpa" runs eager) and its own eager _attn
// (nn.Attention.MaskBuffer): q and k cast to fp32 (QKFP32), the scores not
// scaled, torch.where by a slice of the layer's own bool mask buffer
// ([1, 1, max_position_embeddings, max_position_embeddings], the window
// cut into it for local layers), the model's float mask added, softmax in
// fp32 cast to v's dtype. attention_types names each layer global or local
// ([[["global", "local"], 12]] by default); the two lower alike: the eager
// path computes every score either way and the flash path
// (GPTNeoFlashAttention2, is_causal without a window) ignores the window.
// window_size is read and bounded, never lowered.
//
// GPTNeoConfig's defaults (EleutherAI/gpt-neo-1.3B's sizes) apply to the
// keys config.json leaves out; num_attention_heads and num_hidden_layers
// are its attribute_map names for num_heads and num_layers
// (configClasses). intermediate_size null is 4 x hidden_size.
func buildGPTNeo(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.sizeOr("hidden_size", 2048)
	layers := c.sizeOr("num_layers", 24)
	heads := c.sizeOr("num_heads", 16)
	vocab := c.sizeOr("vocab_size", 50257)
	positions := c.sizeOr("max_position_embeddings", 2048)
	c.sizeOr("window_size", 256)
	inner := c.sizeOr("intermediate_size", 4*hidden)
	act := c.mlpAct("activation_function", "gelu_new", false)
	pa, po, pe := c.prob("attention_dropout", 0), c.prob("resid_dropout", 0), c.prob("embed_dropout", 0)
	tie := c.flag("tie_word_embeddings", true)
	c.gptNeoAttentionTypes(layers)
	if c.err == nil && hidden%heads != 0 {
		c.fail("num_heads", "must divide hidden_size (%d): GPTNeoSelfAttention's head_dim is hidden_size // num_heads, and transformers refuses a remainder (got %d)", hidden, heads)
	}
	drop, after := c.attnDropout("attention_dropout", pa, po, "attn.attention.resid_dropout")
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(inner)) + float64(vocab+positions)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "attn.attention", Dim: hidden, Heads: heads, HeadDim: hidden / heads, OutBias: true, OutName: "out_proj",
		Impl: attn, Causal: true, Dropout: drop, SoftmaxFP32: true, EagerMask: true, QKFP32: true, MaskBuffer: positions}
	s := gpt2Sizes{hidden: hidden, inner: inner, vocab: vocab, positions: positions, layers: layers, act: act,
		residDrop: po, embedDrop: pe, tie: tie}
	return c.gpt2Stack(head, at, after, s)
}

// gptNeoAttentionTypes reads attention_types as GPTNeoConfig expands it
// (expand_attention_types_params: each [[types...], n] entry repeats its
// types n times) and holds it to transformers' checks: one type a layer
// (validate_architecture) and each "global" or "local" (GPTNeoAttention
// raises NotImplementedError on any other). Left out, it is
// [[["global", "local"], 12]]: 24 layers.
func (c *hfConfig) gptNeoAttentionTypes(layers int64) {
	const key = "attention_types"
	if c.err != nil {
		return
	}
	n := int64(24)
	if c.has(key) {
		entries, ok := c.raw[key].([]any)
		if !ok {
			c.fail(key, "must be a list of [[types...], count] entries, as [[[\"global\", \"local\"], 12]] (got %s)", describeJSON(c.raw[key]))
			return
		}
		n = 0
		for i, e := range entries {
			pair, ok := e.([]any)
			var types []any
			var count int64
			if ok && len(pair) == 2 {
				types, _ = pair[0].([]any)
				if k, isNum := pair[1].(json.Number); isNum {
					count, _ = k.Int64()
				}
			}
			if !ok || len(pair) != 2 || len(types) == 0 || count < 0 || count > 1<<20 {
				c.fail(key, "entry %d must be [[types...], count], a non-empty list of \"global\" or \"local\" and a count (got %s)", i, describeJSON(e))
				return
			}
			for _, t := range types {
				if t != "global" && t != "local" {
					c.fail(key, "entry %d names %s: GPTNeoAttention builds \"global\" and \"local\" layers only", i, describeJSON(t))
					return
				}
			}
			n += count * int64(len(types))
		}
	}
	if n != layers {
		c.fail(key, "expands to %d layer types, but num_layers is %d: GPTNeoConfig requires one a layer", n, layers)
	}
}
