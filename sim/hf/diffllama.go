package hf

// DiffLlama (model_type diffllama: kajuma/DiffLlama-0.3B-handcut, the
// checkpoint its docstring loads; DiffLlamaForCausalLM,
// models/diffllama/modular_diffllama.py at transformers 5.25.0) is
// buildDecoder's Llama layer (decoderFamily.diffllama): LlamaModel,
// LlamaAttention's projections biased by attention_bias (q, k, v and o;
// grouped-query heads of head_dim, default hidden_size / heads),
// MistralMLP's unbiased gated MLP, Llama's RMSNorms and
// GemmaForCausalLM's plain head (untied by default), with the
// differential attention of DiffLlamaAttention in every layer
// (nn.Attention.Differential: two kernel calls over the halves of v's
// heads, λ from lambda_q1, lambda_k1, lambda_q2 and lambda_k2, head_dim
// each, and a weightless group norm over each head pair).

// diffLlamaChecks refuses what DiffLlamaAttention.__init__ raises on:
// attention_dropout above 0 and an odd num_key_value_heads.
func (c *hfConfig) diffLlamaChecks(kv int64) {
	if c.err != nil {
		return
	}
	if p := c.prob("attention_dropout", 0); p > 0 {
		c.fail("attention_dropout", "must be 0 (got %g): DiffLlamaAttention refuses attention dropout (the differential combination defines none)", p)
		return
	}
	if kv%2 != 0 {
		c.fail(c.firstKey("num_key_value_heads", "num_attention_heads"), "(%d kv heads) must be even: DiffLlamaAttention splits v's heads in two halves", kv)
	}
}
