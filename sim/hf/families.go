package hf

import "slices"

// The supported model types, one entry a model_type, in order. Each
// entry names the class prefix and base-model attribute transformers
// uses, the heads it has, the builder (the family's file: decoder.go,
// gpt.go, bert.go, deepseek.go, the vision-language readers ...), the
// first transformers release that has it and what its attention and MoE
// paths support.

// hfFamilies is the read-only table of supported model types: the text
// models' below and the vision-language models' (families_vl.go).
var hfFamilies = slices.Concat(textFamilies, vlFamilies)

// textFamilies are the supported text model types (decoders, encoders).
var textFamilies = []hfFamily{
	// afmoe: arcee-ai's Trinity-Mini and Trinity-Nano (afmoe.go); the
	// 5.0.0 wheel is the first with models/afmoe (absent from 4.57.3).
	// Its router's top-k weights are fp32 (the sigmoid over fp32 logits)
	// and _keep_in_fp32_modules_strict keeps expert_bias fp32.
	{modelType: "afmoe", prefix: "Afmoe", base: "model", heads: decoderHeads, build: buildAfmoe, since: [2]int{5, 0},
		experts: &hfExperts{weightsFP32: true, keepScoreBias: true}},
	// apertus: swiss-ai's Apertus-8B and -70B; the 4.56.0 wheel is the
	// first with models/apertus (absent from 4.55.0). decoder.go.
	{modelType: "apertus", prefix: "Apertus", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 56}},
	// apertus1p5_text: swiss-ai's Apertus 1.5 text model (apertus1p5.go);
	// the 5.24.0 wheel is the first with models/apertus1p5 (absent from
	// 5.23.0; unzip -l), its modeling_apertus1p5.py 5.25.0's (diff read).
	{modelType: "apertus1p5_text", prefix: "Apertus1p5Text", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 24}},
	// aria_text: Rhymes' Aria's text model (aria.go). The 4.48.0 wheel is
	// the first with models/aria, but up to 5.17.0 its experts are
	// AriaGroupedExpertsGemm (fc1, fc2, its own grouped GEMM; 4.x a
	// sequential one) and its router an nn.Linear; 5.18.0 is the first
	// with AriaTextTopKRouter and AriaExperts over grouped_mm, as 5.25.0
	// (unzip -p of each wheel's modeling_aria.py).
	{modelType: "aria_text", prefix: "AriaText", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 18},
		sinceWhy: "up to 5.17 Aria's experts are AriaGroupedExpertsGemm (fc1, fc2) under an nn.Linear router, which memsh does not model",
		experts:  &hfExperts{}},
	// arcee: Arcee's AFM-4.5B; the 4.53.0 wheel is the first with
	// models/arcee (absent from 4.52.4). decoder.go.
	{modelType: "arcee", prefix: "Arcee", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 53}},
	// axk1: SK Telecom's A.X-K1 (axk1.go); the 5.15.0 wheel is the first
	// with models/axk1 (absent from 5.14.0). 5.15.0 to 5.25.0's
	// modeling_axk1.py differ in the rotary tables' forward (no_grad),
	// the router's fp32 weight (kept fp32 from 5.24, as DeepSeek-V3's),
	// the experts' sentinel class and the q projection without a latent
	// (5.25.0 always has one): diffed, handled as for deepseek_v3.
	{modelType: "axk1", prefix: "AXK1", base: "model", heads: decoderHeads, build: buildAXK1, noEager: true, since: [2]int{5, 15},
		experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// axk2: SK Telecom's A.X-K2 (axk2.go). The 5.15.0 wheel is the first
	// with models/axk2 (absent from 5.14.0), but 5.15 and 5.16 build the
	// indexer's and the attention's masks themselves from position_ids
	// when the model hands them none; 5.17.0 is the first that forces the
	// causal mask (allow_is_causal_skip False) as 5.25.0 does, and 5.17 to
	// 5.25 differ in the rotary tables' forward (no_grad), the router's
	// fp32 weight (kept fp32 from 5.24) and the experts' sentinel class:
	// diffed, handled as for deepseek_v32.
	{modelType: "axk2", prefix: "AXK2", base: "model", heads: decoderHeads, build: buildAXK2, noEager: true, noFlash: true, since: [2]int{5, 17},
		sinceWhy: "5.15 and 5.16 build A.X-K2's indexer and attention masks from position_ids where the model hands none, which memsh does not model",
		experts:  &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// bailing_hybrid: inclusionAI's Ling 3 (bailing_hybrid.go). The 5.20.0
	// wheel is the first with models/bailing_hybrid (absent from 5.19.0;
	// unzip -l), but 5.20 to 5.23 build its MLA without q_lora_rank and
	// keep the router in the model's dtype, and 5.24 reads no SwiGLU
	// limits (their modeling_bailing_hybrid.py read): memsh models 5.25.0's.
	{modelType: "bailing_hybrid", prefix: "BailingHybrid", base: "model", heads: decoderHeads, build: buildBailingHybrid, noEager: true, since: [2]int{5, 25},
		sinceWhy: "5.20 to 5.24 build Ling 3 without its SwiGLU clamps (expert_swiglu_limit_list), 5.20 to 5.23 without q_lora_rank and with the router in the model's dtype",
		experts:  &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// bamba: IBM's Bamba-9B (bamba.go); memsh follows 5.25.0's modelling.
	{modelType: "bamba", prefix: "Bamba", base: "model", heads: decoderHeads, build: buildBamba, since: [2]int{4, 48}},
	// bitnet: Microsoft's BitNet b1.58 (bitnet.go); 4.51.3 has no
	// models/bitnet, 4.52.4 has (unzip -l). Its quantization_config is
	// refused: inference-only packed or frozen weights, or online
	// quantization-aware training (not modelled).
	{modelType: "bitnet", prefix: "BitNet", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 52}},
	{modelType: "bert", prefix: "Bert", base: "bert", heads: encoderHeads, build: buildBERT, flashSince: [2]int{5, 0}},
	{modelType: "bloom", prefix: "Bloom", base: "transformer", heads: decoderHeads, build: buildBLOOM, noFused: true},
	// cohere: Command R, R+, Aya 23 and Aya Expanse; transformers 4.39
	// (their cards: "Please use transformers version 4.39.1 or higher").
	// cohere2.go.
	{modelType: "cohere", prefix: "Cohere", base: "model", heads: decoderHeads, build: buildCohere2, since: [2]int{4, 39}},
	// cohere2: transformers 4.48 (Command R7B's config.json was written by
	// 4.48.0.dev0; its model page: "added to Hugging Face Transformers on
	// 2024-12-13", after 4.47.0). cohere2.go.
	{modelType: "cohere2", prefix: "Cohere2", base: "model", heads: decoderHeads, build: buildCohere2, since: [2]int{4, 48}},
	// codegen: Salesforce's CodeGen; as gptj, 5.24.0 is the first wheel
	// whose CodeGenAttention runs eager_attention_forward and the
	// attention interface (SDPA) and whose model makes sin and cos once a
	// forward (CodeGenRotaryEmbedding; 5.23.0 has its own _attn, each
	// layer its own embed_positions; 5.24.0's modeling_codegen.py is
	// 5.25.0's). codegen.go.
	{modelType: "codegen", prefix: "CodeGen", base: "transformer", heads: decoderHeads, build: buildCodeGen, since: [2]int{5, 24},
		sinceWhy: "5.23 and earlier run CodeGenAttention's own _attn (no SDPA), each layer slicing sin and cos from its own embed_positions, which memsh does not model"},
	// cwm: Meta's Code World Model, facebook/cwm (decoder.go,
	// decoderFamily.cwm); the 5.0.0 wheel is the first with models/cwm
	// (absent from 4.57.6, the last 4.x; unzip -l). 5.0.0's
	// modeling_cwm.py differs from 5.25.0's in the rotary forward's form,
	// eager's mask slice (a view) and the cache's name (diff read): the
	// same tensors.
	{modelType: "cwm", prefix: "Cwm", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 0}},
	// dbrx: Databricks' DBRX (dbrx.go). models/dbrx is in every release
	// from 4.40.0, but 4.x runs its own attention classes and experts
	// loop, and the 5.0.0 to 5.14.0 wheels' DbrxExperts reshape the
	// tokens by ffn_hidden_size and multiply by w1 untransposed (it runs
	// only where ffn_hidden_size equals d_model; 5.0.0, 5.6.0, 5.12.0,
	// 5.13.0 and 5.14.0 read); the 5.15.0 wheel is the first that runs
	// 5.25.0's experts.
	{modelType: "dbrx", prefix: "Dbrx", base: "transformer", heads: decoderHeads, build: buildDbrx, since: [2]int{5, 15},
		sinceWhy: "4.40 to 4.57 run DBRX's own attention classes and experts loop, and 5.0 to 5.14 reshape the experts' tokens by ffn_hidden_size (they run only where it equals d_model)"},
	// cohere2_moe: Cohere 2's parallel layers with Mixtral's experts
	// behind a top-k softmax router (cohere2_moe.go); the 5.12.0 wheel has
	// models/cohere2_moe, 5.6.0 none (5.7 to 5.11 not read).
	{modelType: "cohere2_moe", prefix: "Cohere2Moe", base: "model", heads: decoderHeads, build: buildCohere2Moe, since: [2]int{5, 12}, experts: &hfExperts{router: "gate"}},
	// cohere_compass_text: the text model of Cohere's North-Micro-Vision
	// (cohere_compass.go). The 5.16.0 wheel is the first with
	// models/cohere_compass (absent from 5.15.0; unzip -l); 5.16 to 5.24
	// differ from 5.25.0 in the rotary tables' forward (the same [batch,
	// seq, head_dim] tables) and in not handing the layers position_ids
	// (what a checkpointed layer holds, seq int64s), diffed.
	{modelType: "cohere_compass_text", prefix: "CohereCompass", base: "model", heads: decoderHeads, build: buildCohereCompass, since: [2]int{5, 16}},
	// deberta-v2: DeBERTa-v3 (deberta.go); eager only
	// (DebertaV2PreTrainedModel has no SDPA or flash path). The 4.53.0
	// wheel's modeling_deberta_v2.py runs the forward 5.25.0 runs (read:
	// it differs in jit.script decorators and typing); 4.52.4's encoder
	// checkpoints its layers by _gradient_checkpointing_func with
	// relative_pos and rel_embeddings positional, which the checkpoint
	// then saves rather than holds.
	{modelType: "deberta-v2", prefix: "DebertaV2", base: "deberta", heads: encoderHeads, build: buildDeBERTa, noFused: true, since: [2]int{4, 53},
		sinceWhy: "4.52 and earlier checkpoint DeBERTa's layers with relative_pos and rel_embeddings as positional inputs, which memsh does not model"},
	// deepseek_v2: DeepSeek-V3's layout with a softmax router (deepseek_v2.go).
	{modelType: "deepseek_v2", prefix: "DeepseekV2", base: "model", heads: decoderHeads, build: buildDeepSeek, noEager: true, experts: &hfExperts{router: "gate", weightsFP32: true, keepRouterSince: keepGateSince}},
	{modelType: "deepseek_v3", prefix: "DeepseekV3", base: "model", heads: decoderHeads, build: buildDeepSeek, noEager: true, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// deepseek_v32: the 5.11.0 wheel is the first with
	// models/deepseek_v32 (absent from 5.10.0); no flash path
	// (DeepseekV32PreTrainedModel._supports_flash_attn = False).
	{modelType: "deepseek_v32", prefix: "DeepseekV32", base: "model", heads: decoderHeads, build: buildDeepSeekV32, noEager: true, noFlash: true, since: [2]int{5, 11}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// deepseek_v4: DeepSeek-V4-Flash and -Pro (deepseek_v4.go); the 5.8.0
	// wheel is the first with models/deepseek_v4 (absent from 5.7.0);
	// memsh follows 5.25.0's module names (5.8.0's indexer has no scorer
	// module: the same parameters). Eager only (DeepseekV4PreTrainedModel:
	// _supports_sdpa and _supports_flash_attn False, so attn="sdpa" runs
	// eager as noFused says).
	{modelType: "deepseek_v4", prefix: "DeepseekV4", base: "model", heads: decoderHeads, build: buildDeepSeekV4, noFused: true, since: [2]int{5, 8}, experts: &hfExperts{}},
	// diffllama: DiffLlama (diffllama.go, decoder.go). models/diffllama is
	// in every wheel from 4.48, but up to 5.12.0 DiffLlamaAttention
	// concatenates v's halves and runs one attention with value heads of
	// 2 x head_dim (and a FlashAttention class of its own); 5.13.0 is the
	// first wheel with 5.25.0's two calls over the halves (5.12.0, 5.13.0
	// and 5.24.0 read; 5.13.0's forward differs in the cache's name).
	{modelType: "diffllama", prefix: "DiffLlama", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 13},
		sinceWhy: "4.48 to 5.12 run DiffLlama's attention once with v's halves concatenated (value heads of 2 x head_dim), which memsh does not model"},
	// dots1: rednote's dots.llm1; the 4.53.0 wheel is the first with
	// models/dots1 (absent from 4.52.4). DeepSeek-V3's router and experts
	// and their fp32 keeps (dots1.go).
	{modelType: "dots1", prefix: "Dots1", base: "model", heads: decoderHeads, build: buildDots1, since: [2]int{4, 53}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// dots3_note_text: the 5.23.0 wheel is the first with models/dots3_note (5.22.2 has none); routers kept fp32 from 5.24 (5.23.0 lists e_score_correction_bias alone)
	{modelType: "dots3_note_text", prefix: "Dots3Note", base: "model", heads: decoderHeads, build: buildDots3Note, noEager: true, noFlash: true, since: [2]int{5, 23}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// ernie4_5: transformers 4.54 (ERNIE-4.5-0.3B-PT's card asks for
	// transformers>=4.54.0; mindone ported models/ernie4_5 and
	// ernie4_5_moe from v4.54.1, mindspore-lab/mindone#1393).
	// buildDecoder's doc; ernie4_5_moe's experts decoderMoE's.
	{modelType: "ernie4_5", prefix: "Ernie4_5", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 54}},
	{modelType: "ernie4_5_moe", prefix: "Ernie4_5_Moe", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 54}, experts: &hfExperts{router: "gate"}},
	// exaone4: transformers 4.54 (EXAONE 4.0's config.json files were
	// written by 4.54.0.dev0; exaone4.go).
	{modelType: "exaone4", prefix: "Exaone4", base: "model", heads: decoderHeads, build: buildExaone4, since: [2]int{4, 54}},
	// exaone_moe: LG's K-EXAONE-236B-A23B; EXAONE 4.0's attention before
	// DeepSeek-V3's MoE (exaone_moe.go). The 5.1.0 wheel is the first with
	// models/exaone_moe (5.0.0 has none); 5.1 and 5.2 route in the MoE
	// block where 5.25 routes in ExaoneMoeTopkRouter, the same tensors.
	// exaone: EXAONE 3.0 and 3.5 as LlamaForCausalLM; 5.24.0 is the first
	// wheel with models/exaone (5.23.0, 5.21.0, 5.18.0 and 5.12.0 have
	// none). exaone.go.
	{modelType: "exaone", prefix: "Llama", base: "model", heads: decoderHeads, build: buildExaone, since: [2]int{5, 24},
		sinceWhy: "earlier releases load EXAONE 3.x only with trust_remote_code, LG's own ExaoneForCausalLM (transformer.h.N modules), which memsh does not model"},
	{modelType: "exaone_moe", prefix: "ExaoneMoe", base: "model", heads: decoderHeads, build: buildExaoneMoe, since: [2]int{5, 1}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	{modelType: "falcon", prefix: "Falcon", base: "transformer", heads: decoderHeads, build: buildFalcon},
	// falcon_h1: TII's Falcon-H1, Mamba-2 and attention side by side in
	// every layer (falcon_h1.go); the 4.53.0 wheel is the first with
	// models/falcon_h1 (absent from 4.52.4).
	{modelType: "falcon_h1", prefix: "FalconH1", base: "model", heads: decoderHeads, build: buildFalconH1, since: [2]int{4, 53}},
	// falcon_mamba: TII's falcon-mamba-7b (mamba.go). Older releases build
	// it too (every wheel read from 4.52.4 on), but up to 5.24.0
	// FalconMambaMixer trains through
	// mamba_inner_fn (with the dt, B and C norms inside) wherever the
	// mamba_ssm kernels load; the 5.25.0 wheel is the first whose mixer
	// always runs the PyTorch loop (no fused path), which memsh models.
	{modelType: "falcon_mamba", prefix: "FalconMamba", base: "backbone", heads: decoderHeads, build: buildFalconMamba, noFused: true, since: [2]int{5, 25},
		sinceWhy: "5.24 and earlier train FalconMamba's mixer through the mamba_ssm kernels (mamba_inner_fn with its dt, B and C norms) wherever they load, which memsh does not model; 5.25 always runs the PyTorch loop"},
	// glm4_moe: transformers 4.54 (its model page: "added to Hugging Face
	// Transformers on 2025-07-21"; ms-swift's GLM-4.5 entry requires
	// transformers>=4.54); glm4_moe_lite: 5.0 (Megatron-Bridge's GLM-4.7
	// page: "transformers >= 5.0.0rc0 is required")
	// glm_moe_dsa: the 5.2.0 wheel is the first with models/glm_moe_dsa
	// (absent from 5.1.0); no flash path.
	{modelType: "glm_moe_dsa", prefix: "GlmMoeDsa", base: "model", heads: decoderHeads, build: buildGlmMoeDsa, noEager: true, noFlash: true, since: [2]int{5, 2}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// glm: the "-hf" GLM-4-9B checkpoints; transformers 4.46 (THUDM's
	// GLM-4 README, 2024-11-01: glm-4-9b-chat-hf is "compatible with
	// transformers>=4.46.2", the GlmModel class). glm.go.
	{modelType: "glm", prefix: "Glm", base: "model", heads: decoderHeads, build: buildGLM4, since: [2]int{4, 46}},
	// glm4: the 4.51.3 patch release added models/glm4 for GLM-4-0414
	// (glm.go).
	{modelType: "glm4", prefix: "Glm4", base: "model", heads: decoderHeads, build: buildGLM4, since: [2]int{4, 51}},
	{modelType: "glm4_moe", prefix: "Glm4Moe", base: "model", heads: decoderHeads, build: buildGLM4MoE, since: [2]int{4, 54}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	{modelType: "glm4_moe_lite", prefix: "Glm4MoeLite", base: "model", heads: decoderHeads, build: buildDeepSeek, noEager: true, since: [2]int{5, 0}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// flex_olmo: AI2's FlexOlmo, OLMo 2's layers with OLMoE's MoE
	// (flex_olmo.go); the 4.57.1 wheel has models/flex_olmo (its sparse
	// block is OLMoE's, line for line), 4.56.2 has none.
	{modelType: "flex_olmo", prefix: "FlexOlmo", base: "model", heads: decoderHeads, build: buildFlexOlmo, since: [2]int{4, 57}, experts: &hfExperts{router: "gate"}},
	// flint: RecursiveSI's Flint (flint.go); the 5.21.0 wheel is the
	// first with models/flint (absent from 5.20.0; unzip -l). 5.21.0 to
	// 5.23.0 make the router's weight and the sinks in the default dtype
	// where 5.24.0 names float32, which from_pretrained's
	// _keep_in_fp32_modules_strict ("gate.weight", "sinks", in every
	// release) makes the same; the rest is the cache's name (diff read).
	// No SDPA path (FlintPreTrainedModel._supports_sdpa False) and no
	// flash-attention 2 one (_compatible_flash_implementations: vLLM's
	// FlashAttention 3 and flash_attention_4): attn="sdpa" runs eager,
	// "flash" is refused.
	{modelType: "flint", prefix: "Flint", base: "model", heads: decoderHeads, build: buildFlint, noSDPA: true, noFlash: true, since: [2]int{5, 21},
		experts: &hfExperts{weightsFP32: true}},
	{modelType: "gemma", prefix: "Gemma", base: "model", heads: decoderHeads, build: buildDecoder},
	{modelType: "gemma2", prefix: "Gemma2", base: "model", heads: decoderHeads, build: buildDecoder, sdpaUntil: [2]int{5, 21}},
	// vaultgemma: Google's VaultGemma 1B, Gemma 2 without the post-norms
	// (decoder_family.go's noPostNorms). The 4.57.0 wheel is the first
	// with models/vaultgemma (4.56.2 has none); like Gemma 2 its SDPA path
	// goes in 5.21 (VaultGemmaPreTrainedModel._supports_sdpa True in
	// 4.57.0, 4.57.1, 5.0.0, 5.12.0, 5.18.0 and 5.20.0, False, "sdpa does
	// not support softcapping", in 5.21.0, 5.23.0 and 5.25.0).
	{modelType: "vaultgemma", prefix: "VaultGemma", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 57}, sdpaUntil: [2]int{5, 21}},
	// gemma3_text: the text model of gemma3 (families_vl.go, whose entry says its release).
	{modelType: "gemma3_text", prefix: "Gemma3", base: "model", heads: decoderHeads, build: buildDecoder},
	// gemma3n_text: the text model of gemma3n (families_vl.go, whose entry says its release).
	{modelType: "gemma3n_text", prefix: "Gemma3n", base: "model", heads: decoderHeads, build: buildGemma3n, since: [2]int{5, 6}, sinceWhy: gemma3nSince},
	// gemma4_text: the text model of gemma4 (families_vl.go, whose entry says its release).
	{modelType: "gemma4_text", prefix: "Gemma4", base: "model", heads: decoderHeads, build: buildGemma4, since: [2]int{5, 5}, experts: &hfExperts{}},
	// gemma4_unified_text: the text model of gemma4_unified (families_vl.go, whose entry says its release).
	{modelType: "gemma4_unified_text", prefix: "Gemma4Unified", base: "model", heads: decoderHeads, build: buildGemma4, since: [2]int{5, 10}},
	{modelType: "gpt2", prefix: "GPT2", base: "transformer", heads: decoderHeads, build: buildGPT2},
	// gpt_bigcode: StarCoder 1, SantaCoder; 4.54.0 is the first wheel
	// whose GPTBigCodeAttention runs eager_attention_forward and the
	// attention interface (4.40.0, 4.48.0, 4.52.4 and 4.53.0 have its own
	// _attn and GPTBigCodeSdpaAttention; 4.54.0, 4.55.0, 4.57.1 and 5.0.0
	// the interface). gpt_bigcode.go.
	{modelType: "gpt_bigcode", prefix: "GPTBigCode", base: "transformer", heads: decoderHeads, build: buildGPTBigCode, since: [2]int{4, 54},
		sinceWhy: "4.53 and earlier run GPTBigCodeAttention's own _attn (baddbmm, a masked fp32 softmax by torch.where) and GPTBigCodeSdpaAttention, which memsh does not model"},
	// gpt_neo: GPTNeoPreTrainedModel has no SDPA path (gpt_neo.go). 5.0.0
	// is the first wheel whose GPTNeoForCausalLM hands its logits to
	// loss_function as they are (4.57.1 and older: lm_logits.to(fp32),
	// then cast back); 4.27.0 the first whose mask buffer is bool (4.26.0's
	// is uint8); 4.10.0 still has _look_back, 4.11.0 not.
	{modelType: "gpt_neo", prefix: "GPTNeo", base: "transformer", heads: decoderHeads, build: buildGPTNeo, noSDPA: true, since: [2]int{5, 0},
		sinceWhy: "4.x's GPTNeoForCausalLM upcasts the logits to fp32 for its loss and casts them back (4.27 to 4.57), casts each layer's uint8 mask buffer to a new bool tensor every forward (4.11 to 4.26) or runs local layers by blocks (4.5 to 4.10), which memsh does not model"},
	{modelType: "gpt_neox", prefix: "GPTNeoX", base: "gpt_neox", heads: decoderHeads, build: buildGPTNeoX},
	// gpt-oss has no SDPA path (GptOssPreTrainedModel._supports_sdpa False,
	// 4.57.6 l.399, 5.25.0 l.378): attn="sdpa" runs eager, sinks and all.
	// 4.55.0 is the first wheel with models/gpt_oss (4.54.0 has none).
	{modelType: "gpt_oss", prefix: "GptOss", base: "model", heads: decoderHeads, build: buildDecoder, noSDPA: true, since: [2]int{4, 55}, experts: &hfExperts{}},
	// gptj: GPT-J-6B; 5.24.0 is the first wheel whose GPTJAttention runs
	// eager_attention_forward and the attention interface (SDPA) and whose
	// model makes sin and cos once a forward (GPTJRotaryEmbedding; 4.53.0
	// to 5.23.0 have its own _attn and GPTJFlashAttention2; 5.24.0 reads
	// as 5.25.0). gptj.go.
	{modelType: "gptj", prefix: "GPTJ", base: "transformer", heads: decoderHeads, build: buildGPTJ, since: [2]int{5, 24},
		sinceWhy: "5.23 and earlier run GPTJAttention's own _attn (no SDPA) and GPTJFlashAttention2, each layer slicing sin and cos from embed_positions itself, which memsh does not model"},
	// granite, granitemoe: Granite 3.x, Llama's and Mixtral's layouts with
	// muP multipliers (granite.go); the 4.45.0 wheel is the first with
	// models/granite and models/granitemoe (absent from 4.44.2).
	{modelType: "granite", prefix: "Granite", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 45}},
	// granite_swa: IBM's granite-swash-2b, Granite with sliding-window
	// layers, attention sinks and a rope base per layer (granite_swa.go);
	// no SDPA path (noSDPA). The 5.15.0 wheel is the first with
	// models/granite_swa (absent from 5.14.0); its modeling differs from
	// 5.25.0's in names (past_key_values) and the rotary embedding's fp32
	// matmul, not in what a step holds.
	{modelType: "granite_swa", prefix: "GraniteSWA", base: "model", heads: decoderHeads, build: buildDecoder, noSDPA: true, since: [2]int{5, 15}},
	{modelType: "granitemoe", prefix: "GraniteMoe", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 45}, experts: &hfExperts{router: "router", paramRouterSince: [2]int{5, 0}}},
	// granitemoe_swa: IBM's granite-swash-3b-a600m, granitemoeshared's
	// layer with GraniteSWA's attention (granite_swa.go); no SDPA path
	// (noSDPA). The 5.15.0 wheel is the first with models/granitemoe_swa
	// (absent from 5.14.0), as for granite_swa.
	{modelType: "granitemoe_swa", prefix: "GraniteMoeSWA", base: "model", heads: decoderHeads, build: buildDecoder, noSDPA: true, since: [2]int{5, 15}, experts: &hfExperts{router: "router", paramRouterSince: [2]int{5, 0}}},
	// granitemoeshared: GraniteMoe with a shared MLP beside the experts
	// (granite.go); the 4.49.0 wheel is the first with
	// models/granitemoeshared (absent from 4.48.0).
	{modelType: "granitemoeshared", prefix: "GraniteMoeShared", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 49}, experts: &hfExperts{router: "router", paramRouterSince: [2]int{5, 0}}},
	// granitemoehybrid: Granite 4.0-H, Mamba-2 and attention layers with
	// routed and shared experts (granite_hybrid.go); the 4.52.0 wheel is
	// the first with models/granitemoehybrid (absent from 4.51.3).
	{modelType: "granitemoehybrid", prefix: "GraniteMoeHybrid", base: "model", heads: decoderHeads, build: buildGraniteMoeHybrid, since: [2]int{4, 52}, experts: &hfExperts{router: "router", paramRouterSince: [2]int{5, 0}}},
	// helium: Kyutai's Helium-1; its model page: "added to Hugging Face
	// Transformers on 2025-01-13", after 4.48.0 (2025-01-10): 4.49.
	// decoder.go.
	{modelType: "helium", prefix: "Helium", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 49}},
	// hrm_text: Sapient's HRM-Text (hrm_text.go); the 5.9.0 wheel is the
	// first with models/hrm_text (absent from 5.8.0; unzip -l). 5.9.0's
	// modeling_hrm_text.py differs from 5.25.0's in the rotary tables'
	// forward (no_grad, the same fp32 cos and sin), the cache's name and
	// the logits' slice (diff read); its configuration the same fields.
	{modelType: "hrm_text", prefix: "HrmText", base: "model", heads: decoderHeads, build: buildHrmText, since: [2]int{5, 9}},
	// hunyuan_v1_dense, hunyuan_v1_moe: the 4.56.0 wheel is the first
	// with models/hunyuan_v1_dense and models/hunyuan_v1_moe (absent from
	// the 4.55.0 and 4.55.4 wheels; "HunYuan opensource",
	// huggingface/transformers#39606, merged after 4.55 was cut, whence
	// ms-swift's transformers>=4.55.0.dev0, modelscope/ms-swift#5236).
	// decoder.go; the MoE block hunyuan.go. Its gate.wg is an fp32
	// nn.Linear in every release, the block's own KeepRouterFP32.
	{modelType: "hunyuan_v1_dense", prefix: "HunYuanDenseV1", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 56}},
	{modelType: "hunyuan_v1_moe", prefix: "HunYuanMoEV1", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 56}, experts: &hfExperts{weightsFP32: true, linearRouter: true}},
	// idefics3: the 4.46.0 wheel is the first with models/idefics3;
	// smolvlm: the 4.50.0 wheel with models/smolvlm (idefics3.go).
	// hy_v3: Tencent's Hy3 and Hy3-preview (hy_v3.go); the 5.6.0 wheel
	// is the first with models/hy_v3 (absent from 5.5.4). 5.6 to 5.23
	// keep e_score_correction_bias alone fp32 (gate.weight from 5.24) and
	// their one_hot has num_experts classes (sentinels from 5.18), as
	// DeepSeek-V3's; their rotary embedding makes the same cos and sin
	// (modeling_hy_v3.py of 5.6.0, 5.10.4, 5.17.0, 5.20.0 and 5.24.0
	// read against 5.25.0's; 5.17.0 measured, TestHYV3Transformers517).
	{modelType: "hy_v3", prefix: "HYV3", base: "model", heads: decoderHeads, build: buildHYV3, since: [2]int{5, 6},
		experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// hyperclovax: NAVER's HyperCLOVAX-SEED-Think-14B, Granite's layer
	// with Peri-LN post-norms and the logits multiplied by
	// logits_scaling (decoder.go); the 5.9.0 wheel is the first with
	// models/hyperclovax (absent from 5.8.0); its modeling differs from
	// 5.25.0's in names and the rotary embedding's fp32 matmul, not in
	// what a step holds.
	{modelType: "hyperclovax", prefix: "HyperCLOVAX", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 9}},
	// internvl: transformers 4.52, as the "-hf" checkpoints' cards ask
	// (internvl.go).
	// internlm3: InternLM3 as LlamaForCausalLM; 5.23.0 is the first
	// wheel with models/internlm3 (absent from 5.22.2; unzip -l), its
	// InternLM3Config 5.25.0's but for keys_to_ignore_at_inference
	// (diff read). internlm3.go.
	{modelType: "internlm3", prefix: "Llama", base: "model", heads: decoderHeads, build: buildInternLM3, since: [2]int{5, 23},
		sinceWhy: "earlier releases load InternLM3 only with trust_remote_code, the hub's own InternLM3ForCausalLM, which memsh does not model"},
	// iquestcoder: IQuest-Coder-V1 as LlamaForCausalLM; 5.23.0 is the
	// first wheel with models/iquestcoder (absent from 5.22.2; unzip -l),
	// its IQuestCoderConfig 5.25.0's but for keys_to_ignore_at_inference
	// (diff read). iquestcoder.go.
	{modelType: "iquestcoder", prefix: "Llama", base: "model", heads: decoderHeads, build: buildIQuestCoder, since: [2]int{5, 23},
		sinceWhy: "earlier releases load IQuest-Coder only with trust_remote_code, the hub's own IQuestCoderForCausalLM, which memsh does not model"},
	{modelType: "jamba", prefix: "Jamba", base: "model", heads: decoderHeads, build: buildJamba, experts: &hfExperts{linearRouter: true, paramRouterSince: [2]int{5, 21}}},
	// kimi_linear: Moonshot AI's Kimi-Linear-48B-A3B; the 5.17.0 wheel is
	// the first with models/kimi_linear (absent from 5.16.0; pip download
	// --no-deps, unzip -l). Kimi Delta Attention and NoPE MLA layers,
	// DeepSeek-V3's MoE (kimi_linear.go); memsh follows 5.25.0's modelling
	// (5.17.0's modeling_kimi_linear.py, read against it, differs in its
	// cache paths, the eager experts' one_hot width and the fp32 keeps:
	// dt_bias and the router stay fp32 from 5.24, kdaFP32Since and
	// keepGateSince; 5.23.0 measured, sim/kimi_linear_test.go).
	{modelType: "kimi_linear", prefix: "KimiLinear", base: "model", heads: decoderHeads, build: buildKimiLinear, noEager: true, since: [2]int{5, 17}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// kolibri1: Aleph Alpha's Kolibri-1 (kolibri1.go); the 5.20.0 wheel is
	// the first with models/kolibri1 (absent from 5.19.0; unzip -l), its
	// modeling_kolibri1.py 5.25.0's but for the cache's name, the rotary
	// forward's no_grad and the bias buffer's explicit fp32 (diff read).
	{modelType: "kolibri1", prefix: "Kolibri1", base: "model", heads: decoderHeads, build: buildKolibri1, since: [2]int{5, 20},
		experts: &hfExperts{weightsFP32: true, keepScoreBias: true}},
	{modelType: "llama", prefix: "Llama", base: "model", heads: decoderHeads, build: buildDecoder},
	// llama4_text: the text model of llama4 (families_vl.go, whose entry says its release).
	{modelType: "llama4_text", prefix: "Llama4", base: "model", heads: decoderHeads, build: buildLlama4, noFlash: true, since: [2]int{4, 51}},
	// jais2: Inception's Jais-2-8B-Chat, Llama's attention with Nemotron's
	// ungated squared-ReLU MLP and nn.LayerNorm norms (decoder.go); the
	// 5.0.0 wheel is the first with models/jais2 (absent from 4.57.6).
	{modelType: "jais2", prefix: "Jais2", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{5, 0}},
	// longcat_flash: the 4.57.0 wheel is the first with
	// models/longcat_flash (absent from 4.56.2), but memsh models 5.25.0's
	// (longcat.go): 4.57 loops over an nn.ModuleList of experts and
	// nn.Identity zero experts, and 5.0.0 to 5.24.0 (read: the 5.0.0,
	// 5.2.0, 5.8.0, 5.12.0, 5.17.0, 5.18.0, 5.19.0, 5.21.0, 5.23.0 and 5.24.0
	// wheels) build a gate_up_proj of n_routed_experts + zero_expert_num
	// experts and run the zero experts in the per-expert loop. Eager is
	// not modelled for MLA.
	{modelType: "longcat_flash", prefix: "LongcatFlash", base: "model", heads: decoderHeads, build: buildLongcatFlash, noEager: true, since: [2]int{5, 25},
		sinceWhy: "5.0 to 5.24 give gate_up_proj rows for the zero experts and loop over them; 4.57 loops over nn.Linear and nn.Identity experts", experts: &hfExperts{weightsFP32: true}},
	// lfm2: the 4.54.0 release, the first after "LFM2" was merged
	// (huggingface/transformers#39340, 2025-07-10; its model page: "added
	// to Hugging Face Transformers on 2025-07-10"). lfm2.go.
	// laguna: poolside's Laguna XS.2 (laguna.go); the 5.7.0 wheel is the
	// first with models/laguna (absent from 5.6.0; unzip -l). 5.7.0,
	// 5.8.0, 5.10.4, 5.17.0, 5.20.0, 5.22.0 and 5.24.0 read against
	// 5.25.0: the rotary forward's form, the one_hot's sentinel class
	// (5.18) and the cache's name differ (5.17.0 measured,
	// TestLagunaTransformers517). Nothing is kept fp32
	// (LagunaPreTrainedModel has no keep list).
	{modelType: "laguna", prefix: "Laguna", base: "model", heads: decoderHeads, build: buildLaguna, since: [2]int{5, 7}, experts: &hfExperts{}},
	// lara_mini: translated's Lara-4-Mini (lara_mini.go); the 5.24.0 wheel
	// is the first with models/lara_mini (absent from 5.23.0; unzip -l).
	{modelType: "lara_mini", prefix: "LaraMini", base: "model", heads: decoderHeads, build: buildLaraMini, since: [2]int{5, 24}, experts: &hfExperts{router: "gate"}},
	{modelType: "lfm2", prefix: "Lfm2", base: "model", heads: decoderHeads, build: buildLFM2, since: [2]int{4, 54}},
	// lfm2_moe: LFM2-8B-A1B; the 5.0.0 wheel is the first with
	// models/lfm2_moe (absent from 4.57.3, the last 4.x). lfm2.go.
	{modelType: "lfm2_moe", prefix: "Lfm2Moe", base: "model", heads: decoderHeads, build: buildLFM2MoE, since: [2]int{5, 0}, experts: &hfExperts{keepScoreBias: true}},
	// lfm3: LiquidAI's LFM3-1.7B (lfm3.go); the 5.23.0 wheel is the
	// first with models/lfm3 (absent from 5.22.2; unzip -l). 5.23.0's
	// modeling_lfm3.py differs from 5.25.0's in the cache's name and the
	// conv's kernel hooks alone (diff read): the same tensors.
	{modelType: "lfm3", prefix: "Lfm3", base: "model", heads: decoderHeads, build: buildLFM3, since: [2]int{5, 23}},
	{modelType: "mamba", prefix: "Mamba", base: "backbone", heads: decoderHeads, build: buildMamba},
	{modelType: "mamba2", prefix: "Mamba2", base: "backbone", heads: decoderHeads, build: buildMamba2},
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
	{modelType: "nemotron_h", prefix: "NemotronH", base: "backbone", modelBaseSince: nemotronLibrarySince, heads: decoderHeads, build: buildNemotronH, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
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
	{modelType: "phimoe", prefix: "Phimoe", base: "model", heads: decoderHeads, build: buildDecoder, experts: &hfExperts{block: "mlp", router: "router", linearRouter: true, noWNames: true}},
	{modelType: "qwen2", prefix: "Qwen2", base: "model", heads: decoderHeads, build: buildDecoder},
	{modelType: "qwen2_moe", prefix: "Qwen2Moe", base: "model", heads: decoderHeads, build: buildDecoder, experts: &hfExperts{router: "gate"}},
	{modelType: "qwen3", prefix: "Qwen3", base: "model", heads: decoderHeads, build: buildDecoder},
	{modelType: "qwen3_moe", prefix: "Qwen3Moe", base: "model", heads: decoderHeads, build: buildDecoder, experts: &hfExperts{router: "gate"}},
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

// encoderHeads are BERT's and RoBERTa's model classes, the masked LM first.
var encoderHeads = []hfHead{headMaskedLM, headBase, headSeqCls, headTokenCls}
