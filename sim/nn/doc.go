// Package nn holds the layer kinds transformers are built from: linear,
// embedding, layer and RMS norms (Cohere's bias-free fp32 LayerNorm:
// cohere_norm.go), dropout and activations, attention
// (eager, SDPA, flash; GQA/MQA, rotary embeddings, q/k norms, softcapping,
// ring attention under context parallelism, Qwen3-Next's output gate),
// state-space, linear-attention and convolution mixers (Mamba, Mamba-2,
// Gated DeltaNet, LFM2's gated short convolution: short_conv.go), MLPs (GELU, SwiGLU, GeGLU),
// mixtures of experts (with the all-to-all of expert parallelism),
// DeepSeek's latent attention and sparse-attention indexer (mla.go,
// mla_indexer.go), DeepSeek-V4's hyper-connections, compressed attention
// and key-value compressors (hyper_connection.go, dsv4_attention.go,
// kv_compressor.go, moe_v4.go), Gemma 3n's AltUp streams and layer
// (gemma3n_altup.go, gemma3n_layer.go), DeBERTa's disentangled attention
// and shared relative embeddings (disentangled.go), Apertus's xIELU
// activation (xielu.go), added position embeddings, poolers (a first-token
// head, mean pooling), scales and parallel or gated branches.
//
// Each kind is a core.Layer: it counts its parameters exactly, validates
// its sizes, and lowers to ops through the core.Builder the way the
// PyTorch module runs (what autograd saves, in which dtype, what is
// transient). Under tensor parallelism a layer lowers this rank's shard
// (Megatron's column- and row-parallel linears, vocabulary-parallel
// embedding) and checks that the layout divides it (CheckLayout).
// A kind that two front ends build (a layer builtin and hf_config) names
// the inputs its checks refuse as Fields (fields.go): each front end names
// them as its user wrote them, a keyword or a config.json key.
package nn
