package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildGPTJ follows transformers' GPTJForCausalLM (model_type gptj:
// EleutherAI/gpt-j-6b and its fine-tunes; models/gptj/modeling_gptj.py at
// 5.25.0): transformer.wte (no position embedding), drop, h: each
// GPTJBlock runs the attention and the MLP side by side on one ln_1
// (nn.LayerNorm) and adds both to its input,
//
//	h = ln_1(x)
//	y = x + attn(h) + mlp(h)
//
// then ln_f and lm_head, an nn.Linear with a bias, untied by default.
// GPTJAttention's q_proj, k_proj, v_proj and out_proj are unbiased; the
// rotary embedding turns the first rotary_dim of each head on adjacent
// pairs (rotate_every_two) before the heads are transposed:
// GPTJRotaryEmbedding hands the layers sin and cos split off one
// [1, seq, rotary_dim] table (embed_positions[position_ids] in the
// embeddings' dtype) and apply_rotary_pos_emb, called for k and for q,
// repeat_interleaves each into a full-width pair its products save
// (nn.Attention.RopeTablesEachCall); torch.cat puts the passed dims back
// before the transpose, so q and k stay seq-major (no RopeCat copy).
// eager_attention_forward multiplies q and k cast to fp32
// (nn.Attention.QKFP32), softmaxes in fp32 and casts the probabilities to
// v's dtype. GPTJMLP is fc_in to n_inner (default 4 x n_embd),
// activation_function (gelu_new), fc_out, biased. attn_pdrop drops the
// probabilities, resid_pdrop the attention's output (attn.resid_dropout)
// and the MLP's (mlp.dropout), embd_pdrop the embeddings. rotary_dim
// null (rotary over n_embd, which transformers' broadcast fails on
// unless n_head is 1) is refused.
func buildGPTJ(c *hfConfig, attn string, head hfHead) *core.Model {
	return buildGPTJLike(c, attn, head, false)
}

// buildGPTJLike is GPT-J's model, or with codegen CodeGen's (codegen.go):
// the same keys, block and head around CodeGen's attention.
func buildGPTJLike(c *hfConfig, attn string, head hfHead, codegen bool) *core.Model {
	class := "GPTJAttention"
	if codegen {
		class = "CodeGenAttention"
	}
	hidden := c.firstSize("n_embd", "hidden_size") // GPTJConfig.attribute_map
	layers := c.firstSize("n_layer", "num_hidden_layers")
	heads := c.firstSize("n_head", "num_attention_heads")
	vocab := c.size("vocab_size")
	c.sizeOr(c.firstKey("n_positions", "max_position_embeddings"), 2048) // embed_positions' rows: a buffer, no parameter
	if c.err == nil && hidden%heads != 0 {
		c.fail(c.firstKey("n_head", "num_attention_heads"), "must divide n_embd (%d): %s makes head_dim n_embd // n_head (got %d)", hidden, class, heads)
	}
	hd := hidden / max(heads, 1)
	if c.null("rotary_dim") && c.err == nil {
		c.fail("rotary_dim", "null (rotary over all n_embd dims) is not modelled: transformers' apply_rotary_pos_emb cannot broadcast it over heads narrower than n_embd; set it (GPT-J-6B: 64)")
	}
	if codegen && c.err == nil && hidden%codegenShards != 0 {
		c.fail(c.firstKey("n_embd", "hidden_size"), "must be a multiple of %d for model_type codegen (got %d): CodeGenAttention views qkv_proj's output as %d shards of 3 x n_embd / %d", codegenShards, hidden, codegenShards, codegenShards)
	}
	rotary := c.sizeOr("rotary_dim", 64) // GPTJConfig's and CodeGenConfig's default
	if c.err == nil && (rotary > hd || rotary%2 != 0) {
		c.fail("rotary_dim", "must be even and at most the head (%d = n_embd / n_head): GPT-J turns adjacent pairs of each head's first rotary_dim dims (got %d)", hd, rotary)
	}
	inner := c.sizeOr("n_inner", 4*hidden)
	act := c.mlpAct("activation_function", "gelu_new", false)
	pa, po, pe := c.prob("attn_pdrop", 0), c.prob("resid_pdrop", 0), c.prob("embd_pdrop", 0)
	tie := c.flag("tie_word_embeddings", false)
	drop, after := c.attnDropout("attn_pdrop", pa, po, "attn.resid_dropout")
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(hidden)+2*float64(hidden)*float64(inner)) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "attn", Dim: hidden, Heads: heads, HeadDim: hd, OutName: "out_proj",
		Impl: attn, Causal: true, Dropout: drop, Rope: true, SoftmaxFP32: true, EagerMask: true, QKFP32: true,
		RopeTables: "rotary_emb", RopeTablesDim: rotary, RopeTablesEachCall: true}
	if codegen {
		at.FusedQKV, at.QKVName, at.QKVShards = true, "qkv_proj", codegenShards
		at.RopeToV, at.RopeTablesDType = true, units.FP32
	}
	var attnBranch core.Layer = at
	if len(after) > 0 {
		attnBranch = seq(append([]core.Layer{at}, after...)...)
	}
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inner, Act: act, Bias: true, Dropout: po, InName: "fc_in", OutName: "fc_out"}
	block := res(&nn.Norm{Name: "ln_1", Dim: hidden, Bias: true}, &nn.Parallel{Branches: []core.Layer{attnBranch, mlp}})
	ls := []core.Layer{&nn.Embedding{Name: "wte", Rows: vocab, Dim: hidden}}
	if pe > 0 {
		ls = append(ls, &nn.Dropout{Name: "drop", P: pe})
	}
	ls = append(ls, &core.Repeat{Name: "h", Layer: block, N: layers}, &nn.Norm{Name: "ln_f", Dim: hidden, Bias: true})
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM {
		m.HeadBias = true // GPTJForCausalLM's lm_head
	}
	return m
}
