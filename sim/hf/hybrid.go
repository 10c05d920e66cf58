package hf

import (
	"strings"

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
//	down_proj)
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
	if exp := c.number("expand", 2); c.err == nil && float64(m.Inner) != exp*float64(hidden) {
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

func buildNemotronH(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	pattern := c.nemotronPattern()
	layers := c.sizeOr("num_hidden_layers", int64(len(pattern)))
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", false)
	if c.err == nil && int64(len(pattern)) != layers {
		c.fail("hybrid_override_pattern", "must give one of M, *, - per layer (%d layers, got %d characters)", layers, len(pattern))
	}
	if c.err != nil {
		return nil
	}
	norm := func() core.Layer { return &nn.Norm{Name: "norm", Dim: hidden, RMS: true} }
	kinds := map[rune]core.Layer{}
	var estimate float64
	for _, k := range pattern {
		if kinds[k] != nil {
			continue
		}
		var mixer core.Layer
		switch k {
		case 'M':
			mixer = c.mamba2Mixer(hidden, true)
		case '*':
			heads := c.size("num_attention_heads")
			hd := c.sizeOr("attention_head_dim", c.sizeOr("head_dim", hidden/max(heads, 1)))
			mixer = &nn.Attention{Name: "mixer", Dim: hidden, Heads: heads, KVHeads: c.kvHeads("num_key_value_heads", heads), HeadDim: hd,
				QKVBias: c.flag("attention_bias", false), OutBias: c.flag("attention_bias", false), Impl: attn, Causal: true,
				SoftmaxFP32: true}
		case '-':
			act := c.str("mlp_hidden_act", "relu2")
			if act != "relu2" {
				c.fail("mlp_hidden_act", "names an activation memsh does not model for nemotron_h (got %q; known: relu2)", act)
			}
			mixer = &nn.MLP{Name: "mixer", Dim: hidden, Hidden: c.size("intermediate_size"), Act: "relu2", Bias: c.flag("mlp_bias", false)}
		default:
			c.fail("hybrid_override_pattern", "has %q: memsh reads M (Mamba-2), * (attention) and - (MLP)", string(k))
			return nil
		}
		if c.err != nil {
			return nil
		}
		kinds[k] = res(norm(), mixer)
		estimate += float64(mixer.Params())
	}
	c.checkTotal(float64(layers)*estimate + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	blocks := make([]core.Layer, 0, layers)
	for _, k := range pattern {
		blocks = append(blocks, kinds[k])
	}
	ls := []core.Layer{&nn.Embedding{Name: "embeddings", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks),
		&nn.Norm{Name: "norm_f", Dim: hidden, RMS: true}}
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
		Impl: attn, Causal: true, SoftmaxFP32: true}
	mlp := &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: inter, Act: act}
	moe := &nn.MoE{Name: "feed_forward", Dim: hidden, Hidden: inter, Experts: experts, TopK: topK, Act: act, RouterName: "router"}
	c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
	c.checkTotal(float64(layers)*(float64(mamba.Params())+float64(at.Params())+float64(moe.Params())) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	kinds := map[[2]bool]core.Layer{}
	blocks := make([]core.Layer, 0, layers)
	for i := range layers {
		k := [2]bool{i%attnPeriod == attnOffset, i%expPeriod == expOffset}
		if kinds[k] == nil {
			var mixer, ff core.Layer = mamba, mlp
			if k[0] {
				mixer = at
			}
			if k[1] {
				ff = moe
			}
			kinds[k] = seq(res(norm("input_layernorm"), mixer), res(norm("pre_ff_layernorm"), ff))
		}
		blocks = append(blocks, kinds[k])
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks),
		&nn.Norm{Name: "final_layernorm", Dim: hidden, RMS: true}}
	return c.finish(head, ls, vocab, tie)
}

// nemotronBlockTypes maps transformers 5's layers_block_type entries to
// hybrid_override_pattern's characters (NemotronHConfig at 5.17.0:
// "linear_attention" M, "moe" E, "full_attention" *, "mlp" -).
var nemotronBlockTypes = map[string]string{"linear_attention": "M", "moe": "E", "full_attention": "*", "mlp": "-"}

// nemotronPattern reads hybrid_override_pattern, or, when absent, the
// layers_block_type list transformers 5 saves in its place (NemotronHConfig
// at 5.17.0 pops hybrid_override_pattern and derives num_hidden_layers
// from the list, so a config it saves has neither).
func (c *hfConfig) nemotronPattern() string {
	if c.has("hybrid_override_pattern") || !c.has("layers_block_type") {
		return c.str("hybrid_override_pattern", "")
	}
	list, ok := c.raw["layers_block_type"].([]any)
	if !ok {
		c.fail("layers_block_type", "must be a list of \"linear_attention\", \"moe\", \"full_attention\", \"mlp\" (got %s)", describeJSON(c.raw["layers_block_type"]))
		return ""
	}
	var b strings.Builder
	for i, v := range list {
		s, _ := v.(string)
		k, ok := nemotronBlockTypes[s]
		if !ok {
			c.fail("layers_block_type", "entry %d must be \"linear_attention\", \"moe\", \"full_attention\" or \"mlp\" (got %s)", i, describeJSON(v))
			return ""
		}
		b.WriteString(k)
	}
	return b.String()
}
