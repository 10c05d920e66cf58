package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildBamba is transformers' BambaForCausalLM (IBM's Bamba-9B v1 and
// v2, models/bamba/modeling_bamba.py at 5.25.0): Llama's pre-norm layers
// whose mixer is a Mamba-2 layer (mamba, BambaMixer: Granite 4.0-H's,
// graniteMamba) or, at the layers attn_layer_indices lists, attention
// (self_attn: GQA, rotary on the first half of each head, the other half
// passed through and concatenated back, as BambaConfig hard-codes
// partial_rotary_factor 0.5), each followed by a SwiGLU MLP:
//
//	x = x + mixer(input_layernorm(x))
//	x = x + feed_forward(pre_ff_layernorm(x))
//
// then final_layernorm and an untied lm_head. The Mamba-2 layers run the
// mamba_ssm kernel as nn.Mamba2 lowers it (as granitemoehybrid's and
// falcon_h1's: where no kernel loads transformers falls back to the
// PyTorch chunked scan, which memsh does not model). A z_loss_coefficient
// above 0 (the logits' logsumexp squared, added to the loss) is refused.
func buildBamba(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	isAttn := c.intList("attn_layer_indices", layers)
	c.object("rope_scaling")
	if z := c.number("z_loss_coefficient", 0); c.err == nil && z != 0 {
		c.fail("z_loss_coefficient", "is %g: the z-loss (logsumexp of the logits, squared) is not modelled; 0 turns it off", z)
	}
	if c.err != nil {
		return nil
	}
	hd := c.headDim("hidden_size", "num_attention_heads", 0)
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: c.kvHeads("num_key_value_heads", heads),
		HeadDim: hd, QKVBias: c.flag("attention_bias", false), OutBias: c.flag("attention_bias", false), Impl: attn,
		Causal: true, SoftmaxFP32: true, Rope: true, EagerMask: true, Dropout: c.prob("attention_dropout", 0),
		RopeTables: "rotary_emb", RopeTablesDim: ropeWidth(hd, 0.5), RopeCat: true}
	mlp := &nn.MLP{Name: "feed_forward", Dim: hidden, Hidden: c.size("intermediate_size"), Act: act, Bias: c.flag("mlp_bias", false)}
	var mamba *nn.Mamba2
	if int64(len(isAttn)) < layers {
		mamba = c.graniteMamba(hidden)
	}
	if c.err != nil {
		return nil
	}
	estimate := float64(at.Params())
	if mamba != nil {
		estimate = max(estimate, float64(mamba.Params()))
	}
	c.checkTotal(float64(layers)*(estimate+float64(mlp.Params())) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	blocks := hybridBlocks(layers, func(i int64) [2]bool { return [2]bool{isAttn[i], false} },
		[2]core.Layer{mamba, at}, [2]core.Layer{mlp, mlp}, [2]string{"input_layernorm", "pre_ff_layernorm"}, hidden)
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks),
		&nn.Norm{Name: "final_layernorm", Dim: hidden, RMS: true}}
	return c.finish(head, ls, vocab, tie)
}
