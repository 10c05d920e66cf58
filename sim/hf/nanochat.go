package hf

// NanoChat (model_type nanochat: karpathy/nanochat-d32, the checkpoint
// its docstring loads; NanoChatForCausalLM, models/nanochat/modular_nanochat.py at
// transformers 5.25.0) is buildDecoder's Llama layer with
// (decoderFamily.nanochat):
//
//   - NanoChatRMSNorm, Llama 4's weightless RMSNorm run in fp32
//     (nn.WeightlessRMSNorm), for input_layernorm, post_attention_layernorm
//     and the model's norm, which NanoChatModel.forward calls before the
//     layers too (hidden_states = self.norm(hidden_states));
//   - Qwen3Attention's projections (q, k, v and o biased by
//     attention_bias, default false) with the rope first and then
//     q_norm and k_norm, the same weightless norm over each head
//     (nn.Attention.QKL2Norm, QKL2Split); its rotate_half flips the other
//     half's sign, the same tensors;
//   - CLIPMLP's fc1, hidden_act (default "relu2": relu, then square) and
//     fc2, unbiased (NanoChatMLP);
//   - Gemma2ForCausalLM's head: the logits soft-capped by
//     final_logit_softcapping (default 15.0; null turns it off), untied
//     by default.
