package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMiniCPM5Moe builds transformers' MiniCPM5MoeForCausalLM
// (model_type minicpm5_moe: OpenBMB's MiniCPM5-15B-A2.5B;
// models/minicpm5_moe, 5.25.0). modular_minicpm5_moe.py takes
// DeepSeek-V3's model, MoE block, experts and sigmoid router (the
// correction bias, n_shared_experts shared experts of
// moe_intermediate_size each: routedMoE; the router's weight and bias kept
// fp32, _keep_in_fp32_modules_strict) in GLM-4.7-Flash's pre-norm decoder
// layer, whose MLP is a dense one of intermediate_size or, where
// mlp_layer_types says "sparse" (default: first_k_dense_replace, 1, on),
// the MoE block. Its attention is Llama's with an output gate
// (MiniCPM5MoeAttention): one q_gate_proj yields each head's query and
// gate (nn.Attention.OutputGate named by QKVNames, no q or k norm), k_proj
// and v_proj grouped-query heads of head_dim (default 128; null:
// hidden_size / num_attention_heads), every projection o_proj included
// biased by attention_bias, the whole head rotated. A key config.json
// leaves out is MiniCPM5MoeConfig's default (configClasses:
// num_experts_per_tok 16, n_routed_experts 160, intermediate_size 8192,
// ...), num_local_experts read as n_routed_experts (attribute_map).
func buildMiniCPM5Moe(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 0) // null: hidden_size / num_attention_heads
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	c.minicpm5Refusals()
	bias := c.flag("attention_bias", false)
	pa := c.prob("attention_dropout", 0)
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: bias, OutBias: bias, Impl: attn, Causal: true, Rope: true, SoftmaxFP32: true,
		OutputGate: true, QKVNames: [3]string{"q_gate_proj"},
		RopeTables: "rotary_emb", EagerMask: true, Dropout: pa, ProbsDropoutOnly: pa > 0}
	experts := c.size("n_routed_experts")
	moeInter := c.size("moe_intermediate_size")
	moe := c.routedMoE(hidden, moeInter, experts, c.count("n_shared_experts"), act)
	c.checkLayer(at, nil)
	c.checkLayer(moe, moeKeys("n_routed_experts", "num_experts_per_tok"))
	sparse := c.sparseLayers(layers, c.intOr("first_k_dense_replace", 1))
	c.checkTotal(float64(layers)*(2*float64(hidden)*float64(heads*hd)*2+2*float64(hidden)*float64(kv*hd)+
		float64(experts+moe.SharedExperts)*3*float64(hidden)*float64(moeInter)+3*float64(hidden)*float64(inter)) +
		2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	dense := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	return c.finish(head, denseOrSparse(hidden, vocab, at, dense, moe, sparse), vocab, tie)
}

// minicpm5Refusals refuses what MiniCPM5MoeConfig (transformers 5.25.0)
// refuses or memsh does not model: use_gated_attention false
// (validate_architecture raises), and a partial_rotary_factor other than
// 1 at the top or in rope_parameters (MiniCPM5MoeRotaryEmbedding's default
// tables turn the whole head; a narrower rope_type's tables would not
// broadcast against q in apply_rotary_pos_emb).
func (c *hfConfig) minicpm5Refusals() {
	if c.has("use_gated_attention") && !c.flag("use_gated_attention", true) {
		c.fail("use_gated_attention", "must be true for model_type minicpm5_moe: MiniCPM5MoeConfig.validate_architecture refuses checkpoints without the gated attention")
	}
	if f := c.number("partial_rotary_factor", 1); c.err == nil && f != 1 {
		c.fail("partial_rotary_factor", "must be 1 for model_type minicpm5_moe (got %g): MiniCPM5MoeAttention rotates the whole head", f)
	}
	c.object("rope_parameters")
	if rp, ok := c.raw["rope_parameters"].(map[string]any); ok && c.err == nil {
		if f, set := rp["partial_rotary_factor"]; set && f != nil {
			if n, ok := f.(json.Number); !ok || n.String() != "1" && n.String() != "1.0" {
				c.fail("rope_parameters", "sets partial_rotary_factor %s: model_type minicpm5_moe rotates the whole head (MiniCPM5MoeAttention), so only 1 is modelled", describeJSON(f))
			}
		}
	}
}
