package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// State-space and hybrid models: transformers' Mamba2ForCausalLM and
// NVIDIA's NemotronHForCausalLM (the hub's modeling_nemotron_h.py). Both
// are pre-norm stacks of single-mixer blocks under a "backbone":
//
//	x + mixer(norm(x)), the mixer a Mamba-2 layer (nn.Mamba2), or in
//	Nemotron-H by hybrid_override_pattern one of "M" Mamba-2, "*"
//	attention (no rotary embeddings), "-" an MLP (up_proj, squared ReLU,
//	down_proj), "E" an MoE block (nemotron_h.go)
//
// Mamba2ForCausalLM keeps the residual stream in fp32 (residual_in_fp32,
// mixerStack); Nemotron-H's configs turn it off (not modelled when on).

// mamba2Mixer reads the Mamba-2 sizes; prefix is "" (Mamba2Config:
// num_heads, state_size, use_bias) or "mamba_" (Nemotron-H: mamba_num_heads,
// ssm_state_size, mamba_proj_bias).
func (c *hfConfig) mamba2Mixer(hidden int64, nemotron bool) *nn.Mamba2 {
	m := &nn.Mamba2{Name: "mixer", Dim: hidden, ConvK: c.sizeOr("conv_kernel", 4), Chunk: c.sizeOr("chunk_size", 256),
		Groups: c.sizeOr("n_groups", 1), ConvBias: c.flag("use_conv_bias", true), GatedNorm: true}
	if nemotron {
		m.Heads, m.HeadDim = c.size("mamba_num_heads"), c.size("mamba_head_dim")
		m.State = c.size("ssm_state_size")
		m.Bias = c.flag("mamba_proj_bias", false)
	} else {
		m.Heads, m.HeadDim = c.size("num_heads"), c.sizeOr("head_dim", 64)
		m.State = c.size("state_size")
		m.Bias = c.flag("use_bias", false)
		m.GatedNorm = c.flag("rms_norm", true)
	}
	m.Inner = m.Heads * m.HeadDim
	// NemotronHMamba2Mixer's width is mamba_num_heads x mamba_head_dim,
	// expand unread (modeling_nemotron_h.py l.593 at 5.25.0: Nemotron 3
	// Nano's expand 2 is not its 64 x 64 over 2688).
	if exp := c.number("expand", 2); c.err == nil && !nemotron && float64(m.Inner) != exp*float64(hidden) {
		c.fail("expand", "(%g) times hidden_size (%d) must be the Mamba heads x head_dim (%d x %d)", exp, hidden, m.Heads, m.HeadDim)
	}
	if nemotron {
		c.checkLayer(m, nemotronMamba2Keys)
	} else {
		c.checkLayer(m, mamba2Keys)
	}
	return m
}

func buildMamba2(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", false)
	mixer := c.mamba2Mixer(hidden, false)
	return c.mixerStack(head, mixer, hidden, layers, vocab, tie)
}

// mixerStack is the Mamba models' backbone (MambaForCausalLM,
// Mamba2ForCausalLM): the embeddings, layers blocks of x + mixer(norm(x)),
// norm_f and the head. With residual_in_fp32 (the default) each block reads
// x in the parameters' dtype and adds its output to x in fp32 (MambaBlock,
// Mamba2Block.forward): the residual stream between blocks is fp32, so a
// checkpointed block keeps an fp32 input, norm_f runs on fp32 and keeps
// its normalized fp32 output, and the head casts back (lm_head(
// hidden_states.to(lm_head.weight.dtype))). Under autocast the parameters
// are fp32 and nothing changes.
func (c *hfConfig) mixerStack(head hfHead, mixer core.Layer, hidden, layers, vocab int64, tie bool) *core.Model {
	if c.err != nil {
		return nil
	}
	c.checkTotal(float64(layers)*float64(mixer.Params()) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	block := res(&nn.Norm{Name: "norm", Dim: hidden, RMS: true}, mixer)
	block.FP32 = c.flag("residual_in_fp32", true) // MambaConfig's and Mamba2Config's default
	ls := []core.Layer{&nn.Embedding{Name: "embeddings", Rows: vocab, Dim: hidden},
		&core.Repeat{Name: "layers", Layer: block, N: layers}, &nn.Norm{Name: "norm_f", Dim: hidden, RMS: true}}
	if block.FP32 && head == headCausalLM {
		ls = append(ls, &nn.ToParams{})
	}
	return c.finish(head, ls, vocab, tie)
}

// buildJamba is transformers' JambaForCausalLM (AI21's Jamba and
// Jamba-1.5): layer i is an attention layer when i % attn_layer_period ==
// attn_layer_offset and a Mamba layer (nn.Mamba) otherwise; its
// feed-forward is a MoE (JambaSparseMoeBlock: an nn.Linear router, the
// per-expert loop, top-k weights not renormalised) when i %
// expert_layer_period == expert_layer_offset, else a SwiGLU MLP. Each
// layer is x + mixer(input_layernorm(x)), then x + feed_forward(
// pre_ff_layernorm(x)); attention without rotary embeddings.
func buildJamba(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", false) // JambaConfig's default
	inter := c.size("intermediate_size")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	experts := c.sizeOr("num_experts", 16)
	topK := c.sizeOr("num_experts_per_tok", 2)
	attnPeriod, attnOffset := c.sizeOr("attn_layer_period", 8), c.sizeOr("attn_layer_offset", 4)
	expPeriod, expOffset := c.sizeOr("expert_layer_period", 2), c.sizeOr("expert_layer_offset", 1)
	act := c.mlpAct("hidden_act", "silu", true)
	state := c.sizeOr("mamba_d_state", 16)
	if c.err == nil && !c.flag("use_mamba_kernels", true) {
		c.fail("use_mamba_kernels", "is false: memsh models the mamba_ssm kernels, not the naive scan (which materialises [batch, inner, seq, state] fp32 tensors)")
	}
	if c.err == nil && heads > hidden { // JambaAttention: head_dim = hidden_size // num_heads
		c.fail("num_attention_heads", "(%d) is more than %q (%d): a head would be 0 wide (head_dim is hidden_size // num_attention_heads)", heads, c.at("hidden_size"), hidden)
	}
	if c.err == nil && (attnOffset >= attnPeriod || expOffset >= expPeriod) {
		c.fail("attn_layer_offset", "and expert_layer_offset must be below their periods (attention %d of %d, experts %d of %d)", attnOffset, attnPeriod, expOffset, expPeriod)
	}
	if c.err != nil {
		return nil
	}
	expand := c.sizeOr("mamba_expand", 2)
	mamba := &nn.Mamba{Name: "mamba", Dim: hidden, Inner: expand * hidden, State: state, ConvK: c.sizeOr("mamba_d_conv", 4),
		DTRank: c.sizeOr("mamba_dt_rank", (hidden+15)/16), Bias: c.flag("mamba_proj_bias", false), ConvBias: c.flag("mamba_conv_bias", true)}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hidden / max(heads, 1),
		Impl: attn, Causal: true, SoftmaxFP32: true, EagerMask: true} // JambaModel hands its create_causal_mask to the attention layers (5.25.0 l. 1007)
	mlp := &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: inter, Act: act}
	moe := &nn.MoE{Name: "feed_forward", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: act, RouterName: "router"}
	c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
	c.checkTotal(float64(layers)*(float64(mamba.Params())+float64(at.Params())+float64(moe.Params())) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	blocks := hybridBlocks(layers, func(i int64) [2]bool { return [2]bool{i%attnPeriod == attnOffset, i%expPeriod == expOffset} },
		[2]core.Layer{mamba, at}, [2]core.Layer{mlp, moe}, [2]string{"input_layernorm", "pre_ff_layernorm"}, hidden)
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks),
		&nn.Norm{Name: "final_layernorm", Dim: hidden, RMS: true}}
	return c.finish(head, ls, vocab, tie)
}

// hybridBlocks builds a hybrid's layers (Jamba's, LFM2's): layer i is
// x + mixer(norm(x)), then x + ff(norm(x)) under the two norms' names,
// where kind(i) picks the mixer (mixers[1], the attention, when its first
// is true) and the feed-forward (ffs[1], the experts, when its second
// is); layers of one kind share one block.
func hybridBlocks(layers int64, kind func(i int64) [2]bool, mixers, ffs [2]core.Layer, norms [2]string, hidden int64) []core.Layer {
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	built := map[[2]bool]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := kind(int64(i))
		if built[k] == nil {
			mixer, ff := mixers[0], ffs[0]
			if k[0] {
				mixer = mixers[1]
			}
			if k[1] {
				ff = ffs[1]
			}
			built[k] = seq(res(norm(norms[0]), mixer), res(norm(norms[1]), ff))
		}
		blocks[i] = built[k]
	}
	return blocks
}
