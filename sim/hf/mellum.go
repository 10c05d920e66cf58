package hf

// Mellum (model_type mellum: JetBrains' Mellum2-12B-A2.5B;
// models/mellum/modular_mellum.py at transformers 5.25.0) is
// MellumForCausalLM, Qwen3-MoE's model (buildDecoder,
// decoderFamily.mellum) with Laguna's layer types:
//
//   - the attention is Qwen3-MoE's (q_norm and k_norm per head, every
//     projection biased by attention_bias, head_dim 128 by default); the
//     layers layer_types calls "sliding_attention" attend to the last
//     sliding_window (1024) keys, the others to all (layer_types defaults
//     to every layer full);
//   - MellumRotaryEmbedding (Laguna's) makes one cos and sin pair for each
//     layer type the layers use, cast to the model's dtype, from
//     rope_parameters[type] (MellumConfig's default: 500000 for full,
//     10000 for sliding), and Qwen3's apply_rotary_pos_emb rotates the
//     whole head with it;
//   - the feed-forward is Qwen3-MoE's sparse block (a softmax router,
//     num_experts experts of moe_intermediate_size, num_experts_per_tok a
//     token, norm_topk_prob by default) where mlp_layer_types says
//     "sparse" (the default, every layer), else a SwiGLU MLP of
//     intermediate_size. MellumConfig drops Qwen3-MoE's
//     decoder_sparse_step, mlp_only_layers and use_sliding_window: they
//     are not read.
//
// The checkpoint's multi-token prediction layer (num_mtp_layers, alias
// num_nextn_predict_layers) is not built: MellumPreTrainedModel ignores
// its mtp.* weights on load, so a step never runs it.

// mellumChecks refuses what MellumConfig or MellumModel refuses that the
// decoder's reading does not: more than one MTP layer
// (MellumConfig.validate_architecture), and rope_parameters without an
// entry for a layer type the layers use or with a table narrower than
// the head (ropePerType: Mellum's "default" honours
// partial_rotary_factor, which Qwen3's apply_rotary_pos_emb cannot
// apply).
func (c *hfConfig) mellumChecks(layers int64, local map[int64]bool) {
	if n := c.intOr("num_nextn_predict_layers", 0); c.err == nil && n > 1 {
		c.fail("num_nextn_predict_layers", "(%d) must be 0 or 1: MellumConfig supports a single MTP layer (validate_architecture)", n)
	}
	var used []string
	if int64(len(local)) < layers {
		used = append(used, "full_attention")
	}
	if len(local) > 0 {
		used = append(used, "sliding_attention")
	}
	c.ropePerType("MellumRotaryEmbedding", used, "proportional")
}
