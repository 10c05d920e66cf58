package hf

import (
	"encoding/json"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildFalconH1 is transformers' FalconH1ForCausalLM (TII's Falcon-H1,
// models/falcon_h1/modeling_falcon_h1.py at 5.25.0): in every layer a
// Mamba-2 mixer and attention run side by side on the same normed input,
// each scaled on the way in and out, then a SwiGLU MLP:
//
//	h = input_layernorm(x)
//	x = x + mamba(h * ssm_in_multiplier) * ssm_out_multiplier
//	      + self_attn(h * attention_in_multiplier) * attention_out_multiplier
//	x = x + feed_forward(pre_ff_layernorm(x))
//
// with inputs_embeds = embed_tokens(ids) * embedding_multiplier and
// logits = lm_head(final_layernorm(x)) * lm_head_multiplier. Each
// multiplier is a Python float: a new tensor, nothing saved, but the
// mixer's and the attention's inputs are two different products, which
// in_proj and q, k, v_proj keep each (the norm's output itself is kept by
// neither). The mixer multiplies in_proj's output by its mup_vector buffer
// (ssm_multipliers per section, nn.Mamba2.MupVector); its intermediate size
// is mamba_d_ssm (or mamba_expand x hidden_size), its gated norm there only
// with mamba_rms_norm. It runs the mamba_ssm kernel as nn.Mamba2 lowers it
// (the PyTorch chunked scan the CPU falls back to is not modelled, as for
// mamba2 and nemotron_h).
//
// Not modelled as tensors: key_multiplier's copy of k before the rotary
// embedding and the gate multiplier's copy of gate_proj's output, which
// replace the tensors they scale (the same bytes; nothing more saved), and
// the down multiplier's product, transient.
func buildFalconH1(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	embed, lmHead := c.multiplier("embedding_multiplier"), c.multiplier("lm_head_multiplier")
	ssmIn, ssmOut := c.multiplier("ssm_in_multiplier"), c.multiplier("ssm_out_multiplier")
	attnIn, attnOut := c.multiplier("attention_in_multiplier"), c.multiplier("attention_out_multiplier")
	c.multiplier("key_multiplier")
	mlpMul := c.falconH1Multipliers("mlp_multipliers", 2)
	c.falconH1Multipliers("ssm_multipliers", 5)
	c.object("rope_scaling")
	if c.err == nil && c.flag("mamba_proj_bias", false) != c.flag("projectors_bias", false) {
		c.fail("projectors_bias", "must equal mamba_proj_bias: memsh gives the mixer's in_proj and out_proj one bias flag")
	}
	if c.err != nil {
		return nil
	}
	mamba := c.falconH1Mamba(hidden)
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: c.kvHeads("num_key_value_heads", heads),
		HeadDim: c.headDim("hidden_size", "num_attention_heads", 0), QKVBias: c.flag("attention_bias", false),
		OutBias: c.flag("attention_bias", false), Impl: attn, Causal: true, SoftmaxFP32: true, Rope: true,
		RopeTables: "rotary_emb", EagerMask: true, Dropout: c.prob("attention_dropout", 0)}
	mlp := &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: c.size("intermediate_size"), Act: act, Bias: c.flag("mlp_bias", false)}
	if c.err != nil {
		return nil
	}
	c.checkTotal(float64(layers)*(float64(mamba.Params())+float64(at.Params())+float64(mlp.Params())) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	// each multiplier in the forward transformers runs it in: the decoder
	// layer's (FalconH1DecoderLayer.forward), ssm_in_multiplier the
	// mixer's (FalconH1Mixer.forward), down_multiplier the MLP's
	// (FalconH1MLP.forward; modeling_falcon_h1.py at 5.25.0)
	mul := func(name string, f float64) core.Layer { return &nn.Scale{Name: name, Factor: f} }
	mulIn := func(name, in string, f float64) core.Layer { return &nn.Scale{Name: name, Factor: f, In: in} }
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	mixers := &nn.Parallel{Branches: []core.Layer{
		seq(mulIn("ssm_in_multiplier", "mamba", ssmIn), mamba, mul("ssm_out_multiplier", ssmOut)),
		seq(mul("attention_in_multiplier", attnIn), at, mul("attention_out_multiplier", attnOut)),
	}}
	block := seq(res(norm("input_layernorm"), mixers), res(norm("pre_ff_layernorm"), mlp, mulIn("down_multiplier", "feed_forward", mlpMul[1])))
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden},
		&nn.Scale{Name: "embedding_multiplier", Factor: embed, Rebinds: true},
		&core.Repeat{Name: "layers", Layer: block, N: layers}, norm("final_layernorm")}
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM {
		m.LogitScale = 1 / lmHead // logits * m: the one new tensor logits / (1/m) makes
	}
	return m
}

// falconH1Multipliers reads a list of n positive multipliers (absent: all
// 1.0, FalconH1Config.__post_init__).
func (c *hfConfig) falconH1Multipliers(key string, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = 1
	}
	v, ok := c.raw[key]
	if !ok || v == nil {
		return out
	}
	list, ok := v.([]any)
	if !ok || len(list) != n {
		c.fail(key, "must be a list of %d multipliers (got %s)", n, describeJSON(v))
		return out
	}
	for i, e := range list {
		n, isNum := e.(json.Number)
		f, err := n.Float64()
		if !isNum || err != nil || !(f > 0) || math.IsInf(f, 0) {
			c.fail(key, "entry %d must be a positive number (got %s)", i, describeJSON(e))
			return out
		}
		out[i] = f
	}
	return out
}

// falconH1Mamba is FalconH1Mixer's sizes: mamba_d_ssm channels (null:
// mamba_expand x hidden_size) in mamba_n_heads heads of mamba_d_head
// ("auto": the channels / heads), mamba_n_groups groups of
// mamba_d_state, mamba_d_conv, mamba_chunk_size; in_proj's bias by
// mamba_proj_bias; the gated norm by mamba_rms_norm (FalconH1Config's
// default: none).
func (c *hfConfig) falconH1Mamba(hidden int64) *nn.Mamba2 {
	inner := c.sizeOr("mamba_expand", 2) * hidden
	if v, ok := c.raw["mamba_d_ssm"]; !ok || v != nil {
		inner = c.sizeOr("mamba_d_ssm", 1024)
	}
	m := &nn.Mamba2{Name: "mamba", Dim: hidden, Inner: inner, Heads: c.sizeOr("mamba_n_heads", 128),
		Groups: c.sizeOr("mamba_n_groups", 1), State: c.sizeOr("mamba_d_state", 256), ConvK: c.sizeOr("mamba_d_conv", 4),
		Chunk: c.sizeOr("mamba_chunk_size", 256), Bias: c.flag("mamba_proj_bias", false), ConvBias: c.flag("mamba_conv_bias", true),
		GatedNorm: c.flag("mamba_rms_norm", false), MupVector: true}
	c.mambaHeads(m, "the mixer's channels, mamba_d_ssm")
	return m
}
