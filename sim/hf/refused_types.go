package hf

// refusedTypes are model types transformers builds that memsh refuses
// with the reason, rather than with the list of those it knows.
var refusedTypes = map[string]refusedType{
	// Apertus1p5ForConditionalGeneration (models/apertus1p5 at 5.25.0):
	// the text model after an IBQ vision tokenizer and a WavTokenizer
	// audio encoder kept in fp32, whose discrete codes it embeds
	"apertus1p5": {"Apertus 1.5's vision tokenizer (IBQ) and audio tokenizer (WavTokenizer) are not modelled",
		`write its text_config out as a config.json of model_type "apertus1p5_text" (Apertus1p5TextForCausalLM, the text model): hf_config reads that`},
	"dory": {doryRefusal, buildingBlocksHint},
	// DogeForCausalLM (models/doge at 5.25.0): Dynamic Mask Attention,
	// scaled residuals and product-key experts (dogeRefusal).
	"doge": {dogeRefusal, buildingBlocksHint},
	// Dots3NoteForConditionalGeneration (models/dots3_note at 5.25.0):
	// the text model after Dots3NoteVisionModel (Qwen2-VL's blocks with an
	// MoE MLP, Dots3NoteVisionMoE) and Dots3NoteAudioModel (a conv stem
	// before Phi-3's layers)
	"dots3_note": {"Dots 3 Note's vision encoder (Dots3NoteVisionModel, whose blocks' MLPs are MoEs) and audio encoder (Dots3NoteAudioModel) are not modelled",
		`write its text_config out as a config.json of model_type "dots3_note_text" (Dots3NoteForCausalLM, the text model): hf_config reads that`},
	"hy_v4": {hyV4Refusal, buildingBlocksHint},
	// Inkling and Inkling 2 (refused_inkling.go)
	"inkling2":           {inkling2Refusal, buildingBlocksHint},
	"inkling2_loop":      {inkling2Refusal, buildingBlocksHint},
	"inkling2_loop_text": {inkling2Refusal, buildingBlocksHint},
	"inkling2_text":      {inkling2Refusal, buildingBlocksHint},
	"inkling_mm_model":   {inklingRefusal, buildingBlocksHint},
	"inkling_text":       {inklingRefusal, buildingBlocksHint},
	// JetMoeForCausalLM (models/jetmoe at 5.25.0): JetMoeAttention's
	// JetMoeMoA routes each token's q projection and output projection to
	// num_experts_per_tok of num_local_experts experts (per-expert loops
	// over JetMoeParallelExperts, index_add back), around one kv_proj whose
	// k and v are repeated that many times; its MoE MLP runs the same
	// loops. memsh has no layer for the routed attention.
	"jetmoe": {"JetMoE's mixture of attention heads (JetMoeMoA: q and o projections routed per token to num_experts_per_tok of num_local_experts experts around a shared kv_proj) is not modelled",
		"describe it with the building blocks (attention, moe, repeat, model) for an estimate: a dense attention of num_key_value_heads x num_experts_per_tok heads over num_key_value_heads kv heads, kv_channels wide, computes what one token's routed heads do"},
	"kolibri1_1":     {kolibri11Refusal, buildingBlocksHint},
	"qwen4_exp":      {qwen4ExpRefusal, buildingBlocksHint},
	"qwen4_exp_text": {qwen4ExpRefusal, buildingBlocksHint},
	"zaya":           {zayaRefusal, buildingBlocksHint},
	"zamba":          {zambaRefusal, zambaHint},
}

// zambaRefusal is why Zyphra's Zamba v1 (Zamba-7B-v1, ZambaForCausalLM,
// models/zamba/modeling_zamba.py at transformers 5.25.0) is not read,
// though its hybrid layers are Zamba2's (zamba2.go) with one shared
// block, no adapters and separate gate, up and down projections: its
// mixer, ZambaMambaMixer, splits in_proj's output into n_mamba_heads
// heads, each with its own slice of the 3-D x_proj_weight,
// dt_proj_weight, dt_proj_bias, A_log and D, and runs one Mamba-1 scan a
// head: mamba_ssm's selective_scan_fn after causal_conv1d_fn where those
// packages load (use_kernel_func_from_hub_with_fallback), else
// transformers' PyTorch loop over the tokens (mamba_selective_scan) for
// each head. memsh's Mamba-1 mixers (nn.Mamba) run one head of 2-D
// weights, through mamba_inner_fn, Jamba's kernels or MambaMixer's loop.
const zambaRefusal = "Zamba v1's mixer (ZambaMambaMixer: n_mamba_heads Mamba-1 scans, one a head, over per-head slices of the 3-D x_proj_weight and dt_proj_weight, through mamba_ssm's selective_scan_fn or transformers' PyTorch loop over the tokens) is not modelled"

// zambaHint points to what memsh does read.
const zambaHint = `Zamba2 (model_type "zamba2") is read; for Zamba v1 describe the model with the building blocks (mamba, attention, mlp, repeat, model) for an estimate`

// zayaRefusal is why Zyphra's ZAYA1 (ZayaForCausalLM,
// models/zaya/modular_zaya.py at transformers 5.25.0; in the 5.20.0
// wheel already) is not read: ZayaCCAProjection makes q and k with
// Compressed Convolutional Attention (q_proj and k_proj concatenated,
// padded, through a depthwise and a grouped Conv1d, plus residual paths
// that average q with k's heads) and v from two half-width projections,
// the second delayed one token (cat of a projected zero row and all but
// the last); ZayaQKNorm L2-normalises q and k to sqrt(head_dim) with a
// learned per-kv-head scale; every layer keeps the residual stream in
// fp32 behind learned scales and biases (ZayaResidualScaling); its
// router is an MLP (down_proj to router_hidden_size, RMSNorm, two GELU
// layers, out_proj over num_experts + 1 classes with a skip expert) fed
// the previous layer's router state (EDA, router_states_scale). None of
// these is an nn layer memsh has.
const zayaRefusal = "ZAYA1's Compressed Convolutional Attention (ZayaCCAProjection: q and k through a depthwise and a grouped Conv1d with residual paths, v half delayed one token), its L2 q/k norm with a learned scale, its fp32 residual stream behind learned scales and biases (ZayaResidualScaling) and its MLP router with a skip expert fed the previous layer's router state are not modelled"

// kolibri11Refusal is why Aleph Alpha's Kolibri 1.1 (Kolibri1_1ForCausalLM,
// models/kolibri1_1/modular_kolibri1_1.py at transformers 5.25.0, the first
// wheel with it: 5.24.0 has none) is not read. It is Kolibri 1's layers
// (kolibri1.go) with, in place of the full ones (every fifth layer by
// default), indexed_attention layers without a rotary embedding: a
// weightless Kolibri1_1Indexer under no_grad selects the keys of each
// query (visible.clone()'d [batch, seq, seq] bool pools, one kept from
// each index_layers layer to the next; past index_topk +
// index_num_local_tokens + index_num_sink_tokens keys it scores the
// queries in fp32 chunks of up to 2^26 scores, hundreds of MB a layer at
// 8,192 tokens, a transient memsh does not lower); the selection is the
// kernel's mask, one of its own a layer (SDPA converts and keeps it); keys
// and values are rounded to NVFP4 with a straight-through gradient
// (nvfp4_fake_quantize's fp32 temporaries, new k and v tensors); and the
// layers kv_source_layers points elsewhere read an earlier layer's keys
// and values and have no k_proj, v_proj or k_norm (shared_kv_states). Its
// first mlp_only_layers run a dense MLP of mlp_only_intermediate_size.
// Measured with tools/oracle/hf_block_saved.py (transformers 5.25.0,
// torch 2.15.0, CPU, fp32, sdpa, nocache, 2 x 32 tokens) on
// sim/testdata/hf/kolibri1-tiny.json made Kolibri 1.1's (model_type
// kolibri1_1; layer_types sliding, indexed, indexed, sliding;
// index_layers [1]; kv_source_layers [0, 1, 1, 3]; mlp_only_layers [0] of
// 96; index_topk 4, index_pool_size 16, index_compression 4,
// index_num_heads 2, 4 local and 2 sink tokens): the rounding's autograd
// graph is packed and freed within the layer (at 2 layers 1,104,164 bytes
// saved, 986,404 kept), the selected mask SDPA keeps is a [2, 1, 32, 32]
// fp32 tensor, and k and v reach the kernel repeated to every head.
const kolibri11Refusal = "Kolibri 1.1's indexed-attention layers are not modelled: a no_grad indexer selecting each query's keys ([batch, seq, seq] pools kept across layers, and past index_topk + index_num_local_tokens + index_num_sink_tokens keys its chunked fp32 scores), the selection handed to the kernel as a mask of each layer's own, keys and values rounded to NVFP4 with a straight-through gradient, and layers reading an earlier layer's keys and values (kv_source_layers) without k_proj or v_proj"

// doryRefusal is why NVIDIA's Nemotron-Labs Dory 1.0 (DoryForCausalLM,
// models/dory/modular_dory.py at transformers 5.25.0; the 5.24.0 wheel is
// the first with models/dory, 5.23.0 has none) is not read. It is nGPT:
// every hidden state L2-normalised onto the unit sphere (DoryL2Norm, a
// weightless x * rsqrt(sum(x^2) + eps) in fp32, before and after each
// sublayer and on the attention's and the MLP's outputs, attn_sub_norm and
// ffn_sub_norm), each residual an interpolation towards the sublayer's
// normed output at a learned per-channel rate (lambda_1, lambda_2), learned
// per-channel scales squared on q after the rope (sqk), inside Afmoe's
// sigmoid output gate (s_gate) and on the MLP's gate and up (suv_gate,
// suv_up), and an lm_head whose fp32 logits are scaled per token
// (DoryLMHead.logit_scale); its middle n_recurrent_layers run
// n_recurrent_loops times (default 2) with the same weights, each loop
// restarting from the input section's normed output plus the last loop's.
// memsh has no layer for the interpolating residual, the squared
// per-channel scales or the loop over shared layers.
const doryRefusal = "Dory's nGPT layers are not modelled: hidden states L2-normalised onto the unit sphere around every sublayer (DoryL2Norm), residuals that interpolate at learned per-channel rates (lambda_1, lambda_2), learned squared scales on q (sqk), the output gate (s_gate), the MLP's gate and up (suv_gate, suv_up) and the fp32 logits (logit_scale), and a recurrent section of n_recurrent_layers run n_recurrent_loops times with the same weights"

// dogeRefusal is why SmallDoge's Doge (DogeForCausalLM,
// models/doge/modular_doge.py at transformers 5.25.0; 4.54.0 is the
// first wheel with models/doge, 4.53.0 has none) is not read.
// DogeAttention is Dynamic Mask Attention: dt_proj reads the values
// (all kv heads) and exp(A * softplus(.)) makes a per-head, per-key
// score expanded into a [batch, kv heads, seq, seq]
// additive mask in the activations' dtype, masked by the causal mask and,
// past keep_window_size keys (2048), by a top-k over every query row (a
// zeros_like mask, its scatter and masked_fill: several [batch, heads,
// seq, seq] tensors), repeated to every head and handed to the kernel
// with gradient through A and dt_proj; q and k are RMS-normed per head.
// Each layer scales its residuals by learned per-channel weights
// (input_residual, post_attention_residual: residual * weight, the
// residual kept) and, with is_moe, its MLP is DogeCDMoE: product-key
// routing (router_gate's two halves' top sqrt(num_experts) logits each,
// their sums over the num_keys² pairs, a top num_experts_per_tok of
// those) over 16,384 single-neuron experts stored as two embedding tables
// (down_embed, up_embed: [tokens, k, hidden] gathered rows and their bmm)
// beside a dense gated MLP; DogeForCausalLM adds Mixtral's load-balancing
// loss with output_router_logits. memsh has no layer for the dynamic
// mask, the scaled residuals or the product-key experts.
const dogeRefusal = "Doge's Dynamic Mask Attention (a per-head additive [batch, heads, seq, seq] mask made from dt_proj over the values, exp(A * softplus(.)), with a top-k over each query's keys past keep_window_size), its residuals scaled by learned per-channel weights (input_residual, post_attention_residual) and its DogeCDMoE (product-key routing over num_experts single-neuron experts stored as the down_embed and up_embed tables beside a dense MLP) are not modelled"

// refusedType is why memsh refuses a model type, and what to do instead.
type refusedType struct{ why, hint string }

// buildingBlocksHint is the hint of a refused type with no reading of
// its own to point to.
const buildingBlocksHint = `describe the model with the building blocks (attention, mlp, moe, repeat, model)`

// hyV4Refusal is why Tencent's HY-V4 (HYV4ForCausalLM,
// models/hy_v4/modular_hy_v4.py at transformers 5.25.0) is not read: its
// attention is GLM-5's latent attention with DSA's indexer (shared by
// layers, indexer_types), a sigmoid gate_proj and a learned sink a head,
// and HYV4PreTrainedModel runs it eager only (_supports_sdpa and
// _supports_flash_attn False: "combination of sinks and DSA"), while
// memsh lowers latent attention under SDPA and flash alone (nn.MLA); its
// residual is hc_mult streams mixed by DeepSeek-V4's hyper-connections
// without the Sinkhorn combination (HYV4HyperConnection: pre and post
// only, post scaled by hc_magnitude), which nn.HyperConnection does not
// model, and its lm_head runs in fp32.
const hyV4Refusal = "HY-V4's latent attention with DSA's indexer, an output gate and sinks runs eager only in transformers (HYV4PreTrainedModel has no SDPA or flash path), which memsh does not lower for latent attention, and its hyper-connections (hc_mult streams, DeepSeek-V4's without the Sinkhorn combination, hc_magnitude) are not modelled"

// qwen4ExpRefusal is why Qwen4-Exp (Qwen4ExpForCausalLM and
// Qwen4ExpForConditionalGeneration, models/qwen4_exp/modular_qwen4_exp.py
// at transformers 5.25.0) is not read. It builds on Qwen3.5-MoE's Gated
// DeltaNet and gated attention (which memsh reads) three mechanisms memsh
// does not model: the residual is hc_count streams, each mixer and MoE
// reading a low-rank gated mix of them (Qwen4ExpTextGatedResidual: a
// grouped RMSNorm, input_mix_weight_down/up, block_inject_weight; the
// model's hyper_connection_mixer in place of the final norm); every
// indexed_attention layer selects its keys with a QSA indexer
// (Qwen4ExpTextQSAIndexer, built whatever the config says: without
// indexer_n_heads the class raises) that loops over each query of each
// sample in Python under autograd, pooling and scoring compressed key
// blocks, and hands attention a boolean mask of its own; and the
// ple_layer_ids layers add hashed n-gram Per-Layer Embeddings
// (Qwen4ExpTextPLELayer: (ngram_size - 1) x heads_per_ngram tables of
// about ngram_vocab_size_base rows each, a dilated depthwise conv1d).
const qwen4ExpRefusal = "Qwen4-Exp's hyper-connection streams (hc_count, Qwen4ExpTextGatedResidual), its QSA indexer, which loops over every query in Python under autograd (indexer_n_heads), and its hashed n-gram Per-Layer Embeddings (ple_layer_ids) are not modelled"
