package hf

// inklingRefusal is why Thinking Machines' Inkling (InklingForCausalLM,
// model_type inkling_text, and InklingForConditionalGeneration,
// inkling_mm_model; models/inkling/modular_inkling.py at transformers
// 5.25.0) is not read. Its layers have no counterpart in memsh:
// InklingAttention adds a relative position bias conditioned on the hidden
// states (r_proj's d_rel states per head times a learned [d_rel,
// rel_extent] bank, gathered by distance into a dense [batch, heads, seq,
// seq] bias that eager attention adds to the scores and SDPA takes as a
// float mask, sdpa_attention.py's create_position_bias_mask); k and v go
// through depthwise causal Conv1d short convolutions kept in fp32 with a
// residual (InklingShortConvolution), as do the attention's and the
// MLP's outputs (attn_sconv, mlp_sconv: four a layer); q and k are
// RMS-normed per head and scaled by 1 / head_dim without a rotary
// embedding; its router scores n_shared_experts shared experts beside
// the routed ones as a sink (InklingTopkRouter: a logsumexp over fp32
// log-sigmoids of the chosen and shared logits), whose weights scale the
// shared experts' batched products (InklingSharedExperts, summed in fp32);
// the embedding is RMS-normed (InklingNormedEmbedding) and the final
// hidden states are divided by logits_mup_width_multiplier before lm_head.
const inklingRefusal = "Inkling's layers are not modelled: a relative position bias conditioned on the hidden states (r_proj and a learned d_rel x rel_extent bank gathered into a dense [batch, heads, seq, seq] bias), fp32 causal short convolutions on k, v and both sublayers' outputs (InklingShortConvolution), a router that scores the shared experts as a sink (InklingTopkRouter) and an RMS-normed embedding"

// inkling2Refusal is why Inkling 2 (Inkling2ForCausalLM, model_type
// inkling2_text, Inkling2ForConditionalGeneration, inkling2;
// models/inkling2/modular_inkling2.py at transformers 5.25.0) and its
// looped variant (inkling2_loop_text and inkling2_loop,
// models/inkling2_loop, which runs layers loop_layer_index_start to
// loop_layer_index_end loop_num_passes times with message gates between
// passes) are not read. Beyond Inkling's relative position bias and fp32
// short convolutions (its full layers' keys and values through dynamic
// short convolutions whose taps are projected per token,
// Inkling2DynamicShortConvolution), every layer's input is an attention
// over the earlier blocks' states (Inkling2BlockAttentionResidual: a
// learned fp32 query over the stacked block sums, n_layers_per_attn_res_block
// layers a block), q and k are L2-clipped after a learned scale (and
// log-scaled by position in the full layers), attention has a sink a head
// projected from the hidden state (sink_proj) and a sigmoid gate of each
// element before o_proj, the experts' SwiGLU softcaps its gate and up
// (Inkling2SoftcappedSwiGLU, in fp32), and transformers runs it eager only
// (Inkling2PreTrainedModel: _supports_sdpa False, "per-token attention
// sinks").
const inkling2Refusal = "Inkling 2's layers are not modelled: each sublayer's input is an attention over the earlier blocks' states (Inkling2BlockAttentionResidual, n_layers_per_attn_res_block), with Inkling's relative position bias, fp32 short convolutions (dynamic ones on the full layers' keys and values), L2-clipped q and k, a sink a head projected per token, and softcapped SwiGLU experts; transformers runs it eager only"
