package hf

import "github.com/memsh/memsh/sim/units"

// BitNet b1.58 (model type bitnet), as transformers 5.25.0 builds it
// (models/bitnet/modular_bitnet.py): BitNetForCausalLM is Llama's
// decoder (buildDecoder, decoderFamily.bitnet) whose attention norms its
// output before o_proj (attn_sub_norm, Llama's RMSNorm over hidden_size;
// nn.Attention.SubNorm) and whose MLP is GemmaMLP's gated one, hidden_act
// relu2 by default, with ffn_sub_norm over the intermediate features
// before down_proj (nn.BitNetMLP). Built from its config, every
// projection is a plain nn.Linear in the model's dtype: the bf16 model
// whose weights training updates.
//
// A quantization_config of quant_method "bitnet" makes from_pretrained
// swap the linears (integrations/bitnet.py, replace_with_bitnet_linear):
// linear_class "bitlinear" (the default) for BitLinear, its ternary
// weights packed four to a uint8 buffer, and "autobitlinear" with
// quantization_mode "offline" (the default) for AutoBitLinear with
// pre-quantized weights and requires_grad False: both inference only
// (BitNetHfQuantizer.is_trainable is False), and refused as such.
// "autobitlinear" with "online" is BitNet's quantization-aware training
// (WeightQuant's ternary copy of every weight and ActQuant's 8-bit copy
// of every input, straight-through gradients): not modelled, refused.

// bitnetChecks refuses what BitNet's reader does not build: an attention
// output whose width is not hidden_size (attn_sub_norm is hidden_size
// wide: transformers' forward fails) and the bitnet quantization_config.
func (c *hfConfig) bitnetChecks(hidden, heads, hd int64) {
	if c.err != nil {
		return
	}
	if heads*hd != hidden {
		c.fail("head_dim", "(%d) times num_attention_heads (%d) must be hidden_size (%d): BitNetAttention's attn_sub_norm is hidden_size wide "+
			"and norms the attention's heads x head_dim output (transformers builds the model, its forward fails)", hd, heads, hidden)
		return
	}
	if !c.has("quantization_config") {
		return
	}
	q := c.sub("quantization_config")
	if q.str("quant_method", "") != "bitnet" || q.err != nil {
		c.err = q.err
		return
	}
	class, mode := q.str("linear_class", "bitlinear"), q.str("quantization_mode", "offline")
	if q.err != nil {
		c.err = q.err
		return
	}
	hint := "the bf16 checkpoint (microsoft/bitnet-b1.58-2B-4T-bf16 holds the master weights for training) is read without quantization_config: " +
		"leave it out to size the model training updates"
	switch {
	case class == "autobitlinear" && mode == "online":
		c.err = &units.Error{Msg: "quantization_config: BitNet's online AutoBitLinear (quantization-aware training: WeightQuant's ternary copy of " +
			"every weight and ActQuant's 8-bit copy of every input in each forward, straight-through gradients) is not modelled", Hint: hint}
	case class == "autobitlinear" || class == "bitlinear":
		what := "BitLinear's ternary weights packed four to a uint8 buffer, without gradient"
		if class == "autobitlinear" {
			what = "offline AutoBitLinear's pre-quantized weights, frozen (requires_grad False)"
		}
		c.err = &units.Error{Msg: "quantization_config: " + what + " are inference only (BitNetHfQuantizer.is_trainable is False: " +
			"transformers trains only linear_class \"autobitlinear\" with quantization_mode \"online\")", Hint: hint}
	default:
		q.fail("linear_class", "must be \"bitlinear\" or \"autobitlinear\" (got %q; BitNetQuantConfig raises otherwise)", class)
		c.err = q.err
	}
}
