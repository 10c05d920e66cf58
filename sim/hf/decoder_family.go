package hf

// Llama and its relatives in transformers: pre-norm decoders with RMSNorm,
// rotary embeddings, a gated MLP (or a mixture of experts) and no
// position table. One builder covers llama (1, 2, 3.x), mistral, mixtral,
// ministral, qwen2, qwen2_moe, qwen3, qwen3_moe, gemma, gemma2, gemma3_text, phi3,
// vaultgemma, phimoe, gpt_oss, granite, granite_swa and granitemoe_swa (granite_swa.go), granitemoe, granitemoeshared, olmoe, aria_text (aria.go), bitnet (bitnet.go), smollm3, ernie4_5,
// ernie4_5_moe, seed_oss, starcoder2, cwm, mellum, hunyuan_v1_dense, hunyuan_v1_moe
// (hunyuan.go), minimax_m2 (minimax.go), arcee, apertus, apertus1p5_text, nanochat (nanochat.go), helium, diffllama, hyperclovax, olmo, nemotron and jais2; their differences are
// the switches of decoderFamily (from each family's modeling_*.py), the
// builder is buildDecoder (decoder.go).
type decoderFamily struct {
	tie        bool  // tie_word_embeddings default
	qkvBias    bool  // q, k, v biased, o not (Qwen2, Qwen2-MoE)
	biasFlags  bool  // attention_bias (q, k, v, o) and mlp_bias (Llama)
	attnBias   bool  // attention_bias (q, k, v, o), no mlp_bias (Qwen3, Gemma, Phi-3.5-MoE, gpt-oss)
	biasDef    bool  // attention_bias's default (gpt-oss: true)
	headDimDef int64 // default head_dim (Gemma 256, Qwen3 128); 0 = hidden/heads
	moe        string
	qkNorm     bool // per-head RMS norm of q and k (Qwen3, Gemma 3)
	// qkNormWide: Llama's RMS norm over q_proj's and k_proj's whole
	// outputs, all the heads at once (OLMoE, olmoe.go)
	qkNormWide bool
	// nope: some layers have no rotary embedding (no_rope_layers;
	// SmolLM3, smollm3.go), whose sliding windows need use_sliding_window
	nope bool
	// gemma: 1 Gemma (embeddings scaled by sqrt(hidden)); 2 Gemma 2 (+
	// sandwich norms, soft-capping, every other layer local); 3 Gemma 3
	// (+ q/k norms, no soft-capping, five local layers to one global)
	gemma     int
	fused     bool // one qkv_proj and one gate_up_proj (Phi-3)
	layerNorm bool // nn.LayerNorm with bias instead of RMSNorm (Phi-3.5-MoE)
	headBias  bool // lm_head_bias (Phi-3.5-MoE)
	sinks     bool // attention sinks (gpt-oss)
	windows   bool // sliding-window layers (layer_types, or the Gemma pattern)
	// everyWindow: every layer slides when sliding_window is set (null:
	// none), as MistralConfig, MixtralConfig, Phi3Config and PhimoeConfig
	// read it
	everyWindow bool
	windowDef   int64 // sliding_window's default (Gemma2Config, Gemma3TextConfig 4096; GptOssConfig 128)
	// windowsUnlessNull: without layer_types every layer slides unless
	// sliding_window is null (MinistralConfig.__post_init__'s layer_types)
	windowsUnlessNull bool
	actKey            string
	mup               bool // Granite's multipliers (granite.go)
	// ernie: ERNIE 4.5's use_bias on every projection, attention without
	// dropout and a rope computed in fp32 on tables each layer makes
	// (buildDecoder's doc)
	ernie bool
	// seedOSS: Seed-OSS's attention_bias (q, k, v), attention_out_bias
	// (o) and mlp_bias, and its two dropouts (buildDecoder's doc)
	seedOSS bool
	// qkNormAfterRope: Hunyuan's query_layernorm and key_layernorm over
	// each head after the rotary embedding (buildDecoder's doc)
	qkNormAfterRope bool
	// starcoder2: StarCoder2's use_bias on every projection, an ungated
	// MLP (c_fc, c_proj) and its three dropouts (buildDecoder's doc)
	starcoder2 bool
	// nanochat: NanoChat's weightless fp32 RMSNorms (also before the
	// layers), q and k normed by them after the rope (q_norm, k_norm) and
	// CLIP's ungated MLP (fc1, hidden_act, fc2) (nanochat.go)
	nanochat bool
	// upDown: an ungated MLP of up_proj and down_proj (Nemotron's MLP,
	// which Arcee's is) with the activation actDef by default
	upDown bool
	actDef string
	// olmoNorm: OLMo's LayerNorm without weight or bias, in fp32
	// (nn.OlmoNorm)
	olmoNorm bool
	// norm1P: Nemotron's NemotronLayerNorm1P, a LayerNorm with a bias
	// weighted by weight + 1.0 (nn.Norm.OnePlus)
	norm1P bool
	// bitnet: BitNet's attn_sub_norm before o_proj and its MLP with
	// ffn_sub_norm (nn.BitNetMLP), its quantization_config refused
	// (bitnet.go)
	bitnet bool
	// helium: Helium's attention_bias on q, k and v (o_proj never),
	// mlp_bias, its RMSNorm weighting the fp32 rows before the cast back
	// (Olmo2Norm's) and its rope on adjacent pairs, the cos and sin
	// repeat_interleaved in every layer (buildDecoder's doc)
	helium bool
	// apertus: Apertus's norms named attention_layernorm and
	// feedforward_layernorm (ApertusDecoderLayer)
	apertus bool
	// noPostNorms: Gemma 2's layer without its post_attention_layernorm
	// and post_feedforward_layernorm, input_layernorm and
	// pre_feedforward_layernorm alone (VaultGemmaDecoderLayer,
	// models/vaultgemma/modeling_vaultgemma.py at 5.25.0)
	noPostNorms bool
	// graniteSWA: GraniteSWA's attention (granite_swa.go): sinks applied
	// after eager's softmax (nn.Attention.SinkScale), every fourth layer
	// full by default and the others sliding, and a rope base per layer
	// (layer_rope_theta, 0 for none)
	graniteSWA bool
	// periNorm: HyperCLOVAX's Peri-LN, an RMSNorm after each sub-layer's
	// output (post_norm1, post_norm2) before the residual multiplier, by
	// use_post_norm (default true; HyperCLOVAXDecoderLayer)
	periNorm bool
	// cwm: CWM's layer (models/cwm/modular_cwm.py at 5.25.0): Qwen2's
	// attention with q, k and v unbiased whatever attention_bias says
	// (CwmAttention replaces them; CwmConfig has no attention_bias),
	// Llama's mlp_bias, and GraniteSWA's layer pattern: every fourth
	// layer full by default (i % 4 == 0), the others sliding, the sliding
	// mask made every forward (sliding_window needed)
	cwm bool
	// mellum: Mellum's layer (models/mellum/modular_mellum.py at 5.25.0):
	// Qwen3-MoE's attention and experts, sliding layers where layer_types
	// says so (all full by default), one rotary pair a layer type in the
	// model's dtype, and mlp_layer_types' dense or sparse feed-forward
	// (all sparse by default) in place of decoder_sparse_step and
	// mlp_only_layers, which MellumConfig drops
	mellum bool
	// diffllama: DiffLlama's differential attention (nn.Attention
	// Differential; modular_diffllama.py at 5.25.0): an even
	// num_key_value_heads and no attention dropout, as
	// DiffLlamaAttention refuses either
	diffllama bool
}

func decoderFamilyOf(mt string) decoderFamily {
	switch mt {
	case "llama", "exaone", "internlm3", "iquestcoder": // LlamaForCausalLM (exaone.go, internlm3.go, iquestcoder.go)
		return decoderFamily{biasFlags: true, actKey: "hidden_act"}
	case "mistral", "ministral3": // Ministral3Config reads sliding_window as MistralConfig does
		return decoderFamily{everyWindow: true, actKey: "hidden_act"}
	case "ministral": // Qwen2's layer without Qwen2's q, k, v biases
		return decoderFamily{windows: true, windowDef: 4096, windowsUnlessNull: true, actKey: "hidden_act"}
	case "mixtral":
		return decoderFamily{moe: "mixtral", everyWindow: true, actKey: "hidden_act"}
	case "qwen2":
		return decoderFamily{qkvBias: true, actKey: "hidden_act"}
	case "qwen2_moe":
		return decoderFamily{qkvBias: true, moe: "qwen2_moe", actKey: "hidden_act"}
	case "qwen3":
		return decoderFamily{attnBias: true, headDimDef: 128, qkNorm: true, actKey: "hidden_act"}
	case "qwen3_moe":
		// Qwen3MoeConfig has no head_dim field: Qwen3MoeAttention's
		// getattr(config, "head_dim", hidden_size // num_attention_heads)
		return decoderFamily{attnBias: true, qkNorm: true, moe: "qwen3_moe", actKey: "hidden_act"}
	case "gemma":
		return decoderFamily{tie: true, attnBias: true, headDimDef: 256, gemma: 1, actKey: "hidden_activation"}
	case "gemma2":
		return decoderFamily{tie: true, attnBias: true, headDimDef: 256, gemma: 2, windows: true, windowDef: 4096, actKey: "hidden_activation"}
	case "vaultgemma":
		return decoderFamily{tie: true, attnBias: true, headDimDef: 256, gemma: 2, noPostNorms: true, windows: true, windowDef: 4096, actKey: "hidden_activation"}
	case "gemma3_text":
		return decoderFamily{tie: true, attnBias: true, headDimDef: 256, gemma: 3, qkNorm: true, windows: true, windowDef: 4096, actKey: "hidden_activation"}
	case "phi3":
		return decoderFamily{fused: true, everyWindow: true, actKey: "hidden_act"}
	case "phimoe":
		return decoderFamily{attnBias: true, moe: "mixtral", layerNorm: true, headBias: true, everyWindow: true, actKey: "hidden_act"}
	case "gpt_oss":
		return decoderFamily{attnBias: true, biasDef: true, moe: "gpt_oss", sinks: true, windows: true, windowDef: 128, actKey: "hidden_act"}
	case "granite":
		return decoderFamily{biasFlags: true, mup: true, actKey: "hidden_act"}
	case "granitemoe":
		return decoderFamily{attnBias: true, moe: "granitemoe", mup: true, actKey: "hidden_act"}
	case "granitemoeshared":
		return decoderFamily{attnBias: true, moe: "granitemoeshared", mup: true, actKey: "hidden_act"}
	case "granite_swa": // GraniteSWAConfig ties the head by default
		return decoderFamily{tie: true, biasFlags: true, mup: true, sinks: true, windows: true, windowDef: 128, graniteSWA: true, actKey: "hidden_act"}
	case "granitemoe_swa": // GraniteMoeShared's layer with GraniteSWA's attention
		return decoderFamily{attnBias: true, moe: "granitemoeshared", mup: true, sinks: true, windows: true, windowDef: 128, graniteSWA: true, actKey: "hidden_act"}
	case "hyperclovax": // HyperCLOVAXConfig: GraniteConfig's keys, head_dim, use_post_norm
		return decoderFamily{biasFlags: true, mup: true, periNorm: true, actKey: "hidden_act"}
	case "olmoe":
		return decoderFamily{attnBias: true, qkNormWide: true, moe: "olmoe", actKey: "hidden_act"}
	case "bitnet": // LlamaAttention's attention_bias; GemmaMLP's unbiased gated MLP (bitnet.go)
		return decoderFamily{attnBias: true, actDef: "relu2", bitnet: true, actKey: "hidden_act"}
	case "aria_text": // LlamaAttention's attention_bias; mlp_bias reaches the shared experts alone (aria.go)
		return decoderFamily{attnBias: true, moe: "aria", actKey: "hidden_act"}
	case "smollm3":
		return decoderFamily{tie: true, biasFlags: true, nope: true, windows: true, actKey: "hidden_act"}
	case "ernie4_5":
		return decoderFamily{tie: true, headDimDef: 128, ernie: true, actKey: "hidden_act"}
	case "ernie4_5_moe":
		return decoderFamily{tie: true, ernie: true, moe: "ernie4_5_moe", actKey: "hidden_act"}
	case "seed_oss":
		return decoderFamily{headDimDef: 128, seedOSS: true, actKey: "hidden_act"}
	case "hunyuan_v1_dense":
		return decoderFamily{attnBias: true, qkNormAfterRope: true, actKey: "hidden_act"}
	case "hunyuan_v1_moe":
		return decoderFamily{attnBias: true, qkNormAfterRope: true, moe: "hunyuan_v1_moe", actKey: "hidden_act"}
	case "minimax_m2":
		return decoderFamily{headDimDef: 128, qkNormWide: true, moe: "minimax_m2", actKey: "hidden_act"}
	case "arcee":
		return decoderFamily{biasFlags: true, upDown: true, actDef: "relu2", actKey: "hidden_act"}
	case "apertus", "apertus1p5_text": // Apertus1p5TextForCausalLM is ApertusForCausalLM (apertus1p5.go)
		return decoderFamily{attnBias: true, qkNorm: true, upDown: true, actDef: "xielu", apertus: true, actKey: "hidden_act"}
	case "nanochat": // NanoChatConfig: Qwen3Attention's attention_bias, relu2, no tie
		return decoderFamily{attnBias: true, nanochat: true, actDef: "relu2", actKey: "hidden_act"}
	case "olmo":
		return decoderFamily{attnBias: true, olmoNorm: true, actKey: "hidden_act"}
	case "nemotron":
		return decoderFamily{biasFlags: true, upDown: true, actDef: "relu2", norm1P: true, actKey: "hidden_act"}
	case "jais2": // Llama's attention, Nemotron's ungated MLP, nn.LayerNorm (decoder.go)
		return decoderFamily{biasFlags: true, upDown: true, actDef: "relu2", layerNorm: true, actKey: "hidden_act"}
	case "helium":
		return decoderFamily{headDimDef: 128, helium: true, actKey: "hidden_act"}
	case "diffllama": // LlamaAttention's attention_bias (q, k, v, o), MistralMLP's unbiased MLP
		return decoderFamily{attnBias: true, diffllama: true, actKey: "hidden_act"}
	case "mellum":
		return decoderFamily{attnBias: true, headDimDef: 128, qkNorm: true, moe: "mellum", windows: true, windowDef: 1024, mellum: true, actKey: "hidden_act"}
	case "cwm":
		return decoderFamily{headDimDef: 128, windows: true, windowDef: 8192, cwm: true, actKey: "hidden_act"}
	case "starcoder2":
		return decoderFamily{tie: true, layerNorm: true, everyWindow: true, starcoder2: true, actKey: "hidden_act"}
	}
	return decoderFamily{actKey: "hidden_act"}
}
