package hf

// textFamiliesMZ are the supported text model types from mamba on, in
// order (textFamilies, families.go).
var textFamiliesMZ = []hfFamily{
	{modelType: "mamba", prefix: "Mamba", base: "backbone", heads: decoderHeads, build: buildMamba},
	// mamba2: the 4.44 wheels are the first with models/mamba2 (4.44.2 has
	// it, 4.43.4 not; unzip -l).
	{modelType: "mamba2", prefix: "Mamba2", base: "backbone", heads: decoderHeads, build: buildMamba2, since: [2]int{4, 44}},
	// mellum: JetBrains' Mellum2-12B-A2.5B (decoder.go,
	// decoderFamily.mellum); models/mellum is first in the 5.10.1 wheel
	// (absent from 5.9.0; PyPI has no 5.10.0; unzip -l). 5.10.1's
	// modeling_mellum.py differs from 5.25.0's in the rotary forward's
	// form, the experts' one_hot sentinel class (5.18, modelled by
	// release: nn.MoE.SentinelsEP) and the router's auxiliary loss
	// (output_router_logits, off by default; diff read).
	{modelType: "mellum", prefix: "Mellum", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 10}, experts: &hfExperts{router: "gate"}},
	// mimo_v2_flash: Xiaomi's MiMo-V2-Flash (mimo_v2_flash.go); the
	// 5.13.0 wheel is the first with models/mimo_v2_flash (absent from
	// 5.12.1; unzip -l). 5.13.0's modeling_mimo_v2_flash.py differs from
	// 5.25.0's in the rotary forward's form, the cache's name and, before
	// 5.24, the router weight's default dtype and fp32 keep
	// (keepRouterSince; diff read). No SDPA path
	// (MiMoV2FlashPreTrainedModel._supports_sdpa False) and no
	// flash-attention 2 one (_compatible_flash_implementations names
	// flash_attention_4 alone): attn="sdpa" runs eager, "flash" is refused.
	{modelType: "mimo_v2_flash", prefix: "MiMoV2Flash", base: "model", heads: decoderHeads, build: buildMiMoV2Flash, noSDPA: true, noFlash: true, since: [2]int{5, 13},
		experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// minicpm3: OpenBMB's MiniCPM3-4B, Llama's layers around DeepSeek-V2's
	// latent attention with MiniCPM's three scalings (minicpm3.go). The
	// 5.13.0 wheel is the first with models/minicpm3 (absent from 5.12.1;
	// unzip -l). 5.13 and 5.14 build MiniCPM3Attention's key as a torch.cat
	// of kv_b_proj's nope part and the rope key and pad v for flash inside
	// the attention, where 5.15 and later (DeepseekV2Attention's expand_kv)
	// copy into new_empty and pad in integrations/flash_attention.py: the
	// same tensors (5.13.0 measured equal to 5.25.0 under sdpa,
	// TestMiniCPM3Transformers513).
	{modelType: "minicpm3", prefix: "MiniCPM3", base: "model", heads: decoderHeads, build: buildMiniCPM3, noEager: true, since: [2]int{5, 13}},
	// minicpm5_moe: OpenBMB's MiniCPM5-15B-A2.5B (minicpm5_moe.go); the
	// 5.25.0 wheel is the first with models/minicpm5_moe (absent from
	// 5.24.0 and 5.22.0; unzip -l). Its router is DeepSeek-V3's, kept fp32
	// as DeepSeek-V3's (_keep_in_fp32_modules_strict, both from 5.25).
	{modelType: "minicpm5_moe", prefix: "MiniCPM5Moe", base: "model", heads: decoderHeads, build: buildMiniCPM5Moe, since: [2]int{5, 25},
		experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// minimax: MiniMax-Text-01 (minimax_text.go). models/minimax is in
	// every release from 4.53 (4.57.6's and 5.0.0's wheels have it), but
	// until 5.14 MiniMaxModel hands the lightning layers the softmax
	// layers' 4-D causal mask, which they apply to v by masked_fill; the
	// 5.15.0 wheel is the first whose lightning layers take
	// create_recurrent_attention_mask's 2-D padding mask (none without
	// padding), and 5.15.0 to 5.25.0 run the same tensors (their
	// modeling_minimax.py diffed: the cache, the rotary tables' forward
	// in no_grad, the aux loss).
	{modelType: "minimax", prefix: "MiniMax", base: "model", heads: decoderHeads, build: buildMiniMax, since: [2]int{5, 15},
		sinceWhy: "4.53 to 5.14 hand MiniMax's lightning layers the 4-D causal mask, applied to v by masked_fill, which memsh does not model",
		experts:  &hfExperts{block: "mlp", router: "gate", weightsFP32: true, noWNames: true}},
	// minimax_m2: MiniMax-M2, M2.1, M2.5; the 5.0.0 wheel is the first
	// with models/minimax_m2 (absent from 4.57.6). minimax.go.
	{modelType: "minimax_m2", prefix: "MiniMaxM2", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 0}, experts: &hfExperts{weightsFP32: true}},
	// minimax_m3_vl_text: MiniMax M3's text model (minimax_m3.go). The
	// 5.12.0 wheel is the first with models/minimax_m3_vl (absent from
	// 5.11.0; unzip -l), but its indexer picks one set of key blocks for
	// every head (a [batch, 1, seq, seq] mask); 5.13.0's picks them per
	// indexer head as 5.25.0's does, and 5.13 to 5.25 differ in the
	// rotary tables' forward and the loop's one_hot classes (diffed),
	// handled as for the other families. No flash path
	// (_supports_flash_attn = False).
	{modelType: "minimax_m3_vl_text", prefix: "MiniMaxM3VL", base: "model", heads: decoderHeads, build: buildMiniMaxM3Text, noFlash: true, since: [2]int{5, 13},
		sinceWhy: "5.12 picks the indexer's key blocks once for every head (a [batch, 1, seq, seq] mask), which memsh does not model",
		experts:  &hfExperts{weightsFP32: true}},
	{modelType: "mistral", prefix: "Mistral", base: "model", heads: decoderHeads, build: buildDecoder},
	// ministral: Ministral-8B-Instruct-2410 (whose hub config.json says
	// mistral with layer_types); the 4.57.0 wheel is the first with
	// models/ministral (absent from 4.56.2). decoder.go.
	{modelType: "ministral", prefix: "Ministral", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 57}},
	// ministral3: Ministral 3's text model alone, from 5.0 (transformers
	// PR #42498; its checkpoints ship it in mistral3, mistral3.go).
	{modelType: "ministral3", prefix: "Ministral3", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 0}},
	// mistral4: Mistral Small 4; DeepSeek-V3's layout with its own
	// attention scale and softmax router (mistral4.go). The 5.4.0 wheel is
	// the first with models/mistral4 (absent from 5.3.0; pip download
	// --no-deps, unzip -l), but up to 5.14 (5.4.0, 5.12.0 and 5.14.0 read)
	// Mistral4Attention has its own forward (k and v from kv_b_proj before
	// the rotation, the key a torch.cat) and Mistral4MoE routes in
	// route_tokens_to_experts; from 5.15.0 (to 5.25.0, read: 5.15.0 to
	// 5.19.0 differ in the cache's and the base model's names) the
	// attention is DeepseekV3Attention's and the router a
	// DeepseekV2TopkRouter, what memsh models.
	{modelType: "mistral4", prefix: "Mistral4", base: "model", heads: decoderHeads, build: buildMistral4, noEager: true, since: [2]int{5, 15},
		sinceWhy: "5.4 to 5.14 build Mistral4Attention with a forward of its own (the key a torch.cat of kv_b_proj's nope part and the rope key) and route in Mistral4MoE",
		experts:  &hfExperts{}},
	{modelType: "mixtral", prefix: "Mixtral", base: "model", heads: decoderHeads, build: buildDecoder, experts: &hfExperts{block: "mlp", router: "gate", weightsFP32: true, noWNames: true}},
	// nemotron: Minitron; 4.44.0 is the first wheel with models/nemotron
	// (4.43.4 has none). decoder.go, nemotron.go.
	{modelType: "nemotron", prefix: "Nemotron", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 44}},
	// mpt: MPT-7B, MPT-30B; 4.32.0 is the first wheel with models/mpt
	// (4.31.0 has none; the attention is the same in 4.32.0, 4.40.0,
	// 4.57.1, 5.0.0 and 5.25.0). mpt.go.
	{modelType: "mpt", prefix: "Mpt", base: "transformer", heads: decoderHeads, build: buildMPT, noFused: true, since: [2]int{4, 32}},
	// nanochat: karpathy's nanochat (nanochat.go); the 5.0.0 wheel is the
	// first with models/nanochat (absent from 4.57.6, the last 4.x; unzip
	// -l). 5.0.0's modeling_nanochat.py differs from 5.25.0's in the
	// rotary forward's form, eager's mask slice (a view) and the cache's
	// name (diff read): the same tensors.
	{modelType: "nanochat", prefix: "NanoChat", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 0}},
	// nemotron_h: Nemotron-H, Nemotron Nano 2, Nemotron 3. From 5.3
	// transformers' models/nemotron_h (nemotronLibrarySince); before it the
	// hub's modeling_nemotron_h.py under trust_remote_code, which imports
	// ALL_ATTENTION_FUNCTIONS from transformers.modeling_utils (NVIDIA's
	// file as nvidia-cosmos/cosmos-rl copies it,
	// nemotron_vl/nemotron_vl_overwrite/modeling_nemotron_h.py): first in
	// the 4.48.0 wheel's modeling_utils.py (absent from 4.47.1's), so an
	// older release cannot load the model at all. nemotron_h.go.
	{modelType: "nemotron_h", prefix: "NemotronH", base: "backbone", modelBaseSince: nemotronLibrarySince, heads: decoderHeads, build: buildNemotronH, since: [2]int{4, 48},
		sinceWhy: "before 5.3 the hub's modeling_nemotron_h.py under trust_remote_code, which imports ALL_ATTENTION_FUNCTIONS from transformers.modeling_utils, first in 4.48",
		experts:  &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// olmo: OLMo-1B-hf, OLMo-7B-hf; 4.40.0 is the first wheel with
	// models/olmo (4.39.3, 4.38.2, 4.38.0 and 4.37.2 have none). decoder.go.
	{modelType: "olmo", prefix: "Olmo", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 40}},
	// olmoe: its model page says "added to Hugging Face Transformers on
	// 2024-09-03", after 4.44.2; 4.45.0 (2024-09-25) is the first release
	// with models/olmoe. olmoe.go.
	{modelType: "olmoe", prefix: "Olmoe", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 45}, experts: &hfExperts{router: "gate"}},
	// olmo2: the 4.47.0 wheel is the first with models/olmo2 (olmo2.go).
	{modelType: "olmo2", prefix: "Olmo2", base: "model", heads: decoderHeads, build: buildOlmo2, since: [2]int{4, 47}},
	// olmo3: transformers 4.57 (models/olmo3 came with "Add Olmo3 model",
	// huggingface/transformers#40778; OLMo 3's config.json files carry
	// transformers_version 4.57.x). olmo3.go.
	{modelType: "olmo3", prefix: "Olmo3", base: "model", heads: decoderHeads, build: buildOlmo2, since: [2]int{4, 57}},
	// olmo_hybrid: Ai2's Olmo-Hybrid-7B; the 5.3.0 wheel is the first with
	// models/olmo_hybrid (absent from 5.2.0). olmo_hybrid.go.
	{modelType: "olmo_hybrid", prefix: "OlmoHybrid", base: "model", heads: decoderHeads, build: buildOlmoHybrid, since: [2]int{5, 3}},
	{modelType: "opt", prefix: "OPT", base: "model.decoder", heads: decoderHeads, build: buildOPT},
	// phi: Phi-1, Phi-1.5, Phi-2; transformers 4.37 (the phi-2 card:
	// integrated in "the development version (4.37.0.dev) of
	// transformers"). phi.go.
	// param2moe: BharatGen's Param2-17B-A2.4B, run as Glm4MoeForCausalLM
	// under Param2MoeConfig (sarvam_moe.go); the 5.25.0 wheel is the first
	// with models/param2moe (absent from 5.24.0).
	{modelType: "param2moe", prefix: "Glm4Moe", base: "model", heads: decoderHeads, build: buildGLM4MoE, since: [2]int{5, 25}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// persimmon: models/persimmon is in the 4.35 wheel, but 4.52 and
	// earlier run PersimmonAttention's own eager attention only (no SDPA
	// or flash path)
	{modelType: "persimmon", prefix: "Persimmon", base: "model", heads: decoderHeads, build: buildPersimmon, since: [2]int{4, 53},
		sinceWhy: "4.52 and earlier run PersimmonAttention's own eager attention only (no SDPA or flash path: _supports_sdpa is 4.53's)"},
	{modelType: "phi", prefix: "Phi", base: "model", heads: decoderHeads, build: buildPhi, since: [2]int{4, 37}},
	{modelType: "phi3", prefix: "Phi3", base: "model", heads: decoderHeads, build: buildDecoder},
	// phimoe: the 4.46.0 wheel is the first with models/phimoe (absent from
	// 4.45.2); Phi-3.5-MoE ran the hub's modeling_phimoe.py before.
	{modelType: "phimoe", prefix: "Phimoe", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 46},
		sinceWhy: "before 4.46 Phi-3.5-MoE runs the hub's modeling_phimoe.py (trust_remote_code), which memsh does not model",
		experts:  &hfExperts{block: "mlp", router: "router", linearRouter: true, noWNames: true}},
	{modelType: "qwen2", prefix: "Qwen2", base: "model", heads: decoderHeads, build: buildDecoder},
	{modelType: "qwen2_moe", prefix: "Qwen2Moe", base: "model", heads: decoderHeads, build: buildDecoder, experts: &hfExperts{router: "gate"}},
	// qwen3, qwen3_moe: the 4.51.0 wheel is the first with models/qwen3 and
	// models/qwen3_moe (absent from 4.50.3; unzip -l).
	{modelType: "qwen3", prefix: "Qwen3", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 51}},
	{modelType: "qwen3_moe", prefix: "Qwen3Moe", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 51}, experts: &hfExperts{router: "gate"}},
	// qwen3_next: transformers 4.57 (absent from the 4.56.2 wheel; its
	// model page: "added to Hugging Face Transformers on 2025-09-10");
	// qwen3_5, qwen3_5_moe and their text models: 5.2 (absent from the
	// 5.1.0 wheel, present in 5.2.0). qwen3next.go.
	{modelType: "qwen3_next", prefix: "Qwen3Next", base: "model", heads: decoderHeads, build: buildQwen3Next, since: [2]int{4, 57}, experts: &hfExperts{router: "gate"}},
	{modelType: "qwen3_5", prefix: "Qwen3_5", base: "model", heads: decoderHeads, build: buildQwen35, since: [2]int{5, 2}, condGen: true},
	{modelType: "qwen3_5_moe", prefix: "Qwen3_5Moe", base: "model", heads: decoderHeads, build: buildQwen35, since: [2]int{5, 2}, experts: &hfExperts{router: "gate"}, condGen: true},
	{modelType: "qwen3_5_moe_text", prefix: "Qwen3_5Moe", base: "model", heads: decoderHeads, build: buildQwen35, since: [2]int{5, 2}, experts: &hfExperts{router: "gate"}},
	{modelType: "qwen3_5_text", prefix: "Qwen3_5", base: "model", heads: decoderHeads, build: buildQwen35, since: [2]int{5, 2}},
	// seed_oss: transformers 4.56 (decoder.go).
	// sarvam_mla: Sarvam AI's sarvam-105b, run as DeepseekV3ForCausalLM
	// under SarvamMLAConfig (config_class.go); the 5.24.0 wheel is the
	// first with models/sarvam_mla (absent from 5.23.0), its config class
	// 5.25.0's but for the tensor-parallel plans.
	{modelType: "sarvam_mla", prefix: "DeepseekV3", base: "model", heads: decoderHeads, build: buildDeepSeek, noEager: true, since: [2]int{5, 24}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// sarvam_moe: Sarvam AI's sarvam-30b, run as Glm4MoeForCausalLM under
	// SarvamMoEConfig (sarvam_moe.go); the 5.24.0 wheel is the first with
	// models/sarvam_moe (absent from 5.23.0), its config class 5.25.0's but
	// for the tensor-parallel plan, its Glm4Moe modelling 5.25.0's.
	{modelType: "sarvam_moe", prefix: "Glm4Moe", base: "model", heads: decoderHeads, build: buildGLM4MoE, since: [2]int{5, 24}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	{modelType: "seed_oss", prefix: "SeedOss", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 56}},
	// smollm3: transformers 4.53 (the SmolLM3-3B card: "The modeling code
	// for SmolLM3 is available in transformers v4.53.0"). smollm3.go.
	{modelType: "smollm3", prefix: "SmolLM3", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 53}},
	// stablelm: StableLM 2 and StableLM-3B-4E1T; 4.38.0 is the first
	// wheel with models/stablelm (4.37.2 has none; 4.38.0, 4.38.2, 4.39.3
	// and 4.40.0 checked). 4.38 and 4.39 have no SDPA path (sdpaSince) and
	// no use_parallel_residual (stablelm.go refuses it there). stablelm.go.
	{modelType: "stablelm", prefix: "StableLm", base: "model", heads: decoderHeads, build: buildStableLM, since: [2]int{4, 38}, sdpaSince: [2]int{4, 40}},
	// starcoder2: the 4.39.0 release (4.38.2 cannot load it,
	// hiyouga/LlamaFactory#2762; vLLM dropped its own Starcoder2Config on
	// moving to 4.39.0, vllm-project/vllm#3551). decoder.go.
	// solar_open: Upstage's Solar-Open-100B; GLM-4.5's MoE and router
	// behind Llama's attention (solar_open.go). The 5.0.0 wheel is the
	// first with models/solar_open (4.57.1 has none); its modelling is
	// 5.25.0's but the keep lists (gate.weight from 5.24, keepGateSince).
	{modelType: "solar_open", prefix: "SolarOpen", base: "model", heads: decoderHeads, build: buildSolarOpen, since: [2]int{5, 0}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	{modelType: "starcoder2", prefix: "Starcoder2", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 39}},
	// recurrent_gemma: Google's RecurrentGemma (Griffin; recurrent_gemma.go).
	// The 4.40.0 wheel is the first with models/recurrent_gemma (4.39.3
	// has none), but 4.40 to 5.12 rotate with torch.chunk's halves (and
	// 4.x to 5.0 keep the attention's own cache and mask), and 5.13.0 to
	// 5.16.0 rotate the whole head (their rotary_emb ignores
	// partial_rotary_factor); 5.17.0 is the first that builds it as
	// 5.25.0 does (modeling_recurrent_gemma.py of each wheel read).
	{modelType: "recurrent_gemma", prefix: "RecurrentGemma", base: "model", heads: decoderHeads, build: buildRecurrentGemma, since: [2]int{5, 17},
		sinceWhy: "4.40 to 5.12 rotate with torch.chunk's halves (4.x and 5.0 with the attention's own cache and mask), 5.13 to 5.16 rotate the whole head"},
	// youtu: Tencent's Youtu-LLM-2B, Llama's layers around DeepSeek-V3's
	// latent attention (youtu.go). The 5.1.0 wheel is the first with
	// models/youtu (absent from 5.0.0); up to 5.14 its attention builds
	// the key by torch.cat, from 5.15 by expand_kv's copies: the same
	// tensors (5.1.0 and 5.14.0 measured equal to 5.25.0 under sdpa,
	// TestYoutuTransformers51).
	{modelType: "youtu", prefix: "Youtu", base: "model", heads: decoderHeads, build: buildYoutu, noEager: true, since: [2]int{5, 1}},
	// zamba2: Zyphra's Zamba2 (zamba2.go). The 4.57.1 wheel has
	// models/zamba2 (4.48.0 has not), but 4.x trains its Mamba-2 layers
	// through the split kernels unless use_mem_eff_path (another saved
	// set), 5.0.0 ties every shared block to layers.0's, and 5.6.0 to
	// 5.16.0 number the shared blocks by layer rather than by hybrid layer
	// (block_id = layer_id % num_mem_blocks: the adapters sit elsewhere);
	// 5.17.0 is the first that builds it as 5.25.0 does (modeling_zamba2.py
	// of each wheel read).
	{modelType: "zamba2", prefix: "Zamba2", base: "model", heads: decoderHeads, build: buildZamba2, since: [2]int{5, 17},
		sinceWhy: "4.x trains the Mamba-2 layers through the split kernels (use_mem_eff_path off), 5.0 to 5.16 tie or number the shared blocks differently (5.0.0 every block to layers.0's, 5.6.0 to 5.16.0 by layer index: the adapters sit elsewhere)"},
	// roberta, xlm-roberta (model_type "xlm-roberta", as XLMRobertaConfig
	// spells it): BERT's layers in bert.go. RoBERTa came with
	// pytorch-transformers 1.1.0, XLM-RoBERTa with transformers 2.3
	// (flairNLP/flair#1333, "Transformers 2.3 update": "Support for
	// XLM-RoBERTa"); like BERT, a flash-attention 2 path from 5.0 (4.57.1's
	// RobertaPreTrainedModel has _supports_sdpa only).
	{modelType: "roberta", prefix: "Roberta", base: "roberta", heads: encoderHeads, build: buildBERT, flashSince: [2]int{5, 0}, since: [2]int{1, 1}},
	// xglm: XGLMPreTrainedModel supports neither SDPA nor flash (xglm.go).
	// 4.49.0 is the first wheel whose XGLMForCausalLM calls loss_function
	// (4.48.0 builds a shifted labels copy and runs CrossEntropyLoss);
	// models/xglm is in every wheel read from 4.31.0.
	{modelType: "xglm", prefix: "XGLM", base: "model", heads: decoderHeads, build: buildXGLM, noSDPA: true, noFlash: true, since: [2]int{4, 49},
		sinceWhy: "4.48 and earlier compute XGLMForCausalLM's own loss over a shifted copy of the labels (labels.new_zeros, then CrossEntropyLoss), which memsh does not model"},
	{modelType: "xlm-roberta", prefix: "XLMRoberta", base: "roberta", heads: encoderHeads, build: buildBERT, flashSince: [2]int{5, 0}, since: [2]int{2, 3}},
	// modernbert: transformers 4.48.0 first built it (ModernBERT-base's
	// config.json was written by 4.47.0.dev0; its card asks for 4.48.0),
	// but up to 5.0.0 its ModernBertModel makes a float mask for every
	// layer under sdpa and eager (_update_attention_mask) and unpads the
	// batch under flash_attention_2 (_unpad_modernbert_input, still in the
	// 5.0.0 wheel); the 5.1.0 wheel is the first built on masking_utils
	// without them, as 5.25.0 is (5.1.0 to 5.25.0 differ in nothing that
	// allocates): memsh builds that (modernbert.go).
	{modelType: "modernbert", prefix: "ModernBert", base: "model", heads: encoderHeads, build: buildModernBERT, since: [2]int{5, 1},
		sinceWhy: "4.48 to 5.0 mask every layer and unpad the batch under flash_attention_2, which memsh does not model"},
}
