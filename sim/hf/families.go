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

// textFamilies are the supported text model types (decoders, encoders),
// in order: those before mamba here, mamba on in textFamiliesMZ
// (families_m_z.go).
var textFamilies = slices.Concat(textFamiliesAL, textFamiliesMZ)

// textFamiliesAL are the text model types before mamba.
var textFamiliesAL = []hfFamily{
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
	// deepseek_v2: DeepSeek-V3's layout with a softmax router (deepseek_v2.go);
	// the 4.54.0 wheel is the first with models/deepseek_v2 (absent from
	// 4.53.0; unzip -l), deepseek_v3 the 4.51.0 wheel (absent from 4.50.3).
	// Before them the checkpoints ran the hub's modeling_deepseek.py
	// (trust_remote_code).
	{modelType: "deepseek_v2", prefix: "DeepseekV2", base: "model", heads: decoderHeads, build: buildDeepSeek, noEager: true, since: [2]int{4, 54},
		sinceWhy: "before 4.54 DeepSeek-V2 runs the hub's modeling_deepseek.py (trust_remote_code), which memsh does not model",
		experts:  &hfExperts{router: "gate", weightsFP32: true, keepRouterSince: keepGateSince}},
	{modelType: "deepseek_v3", prefix: "DeepseekV3", base: "model", heads: decoderHeads, build: buildDeepSeek, noEager: true, since: [2]int{4, 51},
		sinceWhy: "before 4.51 DeepSeek-V3 runs the hub's modeling_deepseek.py (trust_remote_code), which memsh does not model",
		experts:  &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
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
	// gemma2: the 4.42.0 wheel is the first with models/gemma2 (absent from
	// 4.41.2; unzip -l).
	{modelType: "gemma2", prefix: "Gemma2", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 42}, sdpaUntil: [2]int{5, 21}},
	// vaultgemma: Google's VaultGemma 1B, Gemma 2 without the post-norms
	// (decoder_family.go's noPostNorms). The 4.57.0 wheel is the first
	// with models/vaultgemma (4.56.2 has none); like Gemma 2 its SDPA path
	// goes in 5.21 (VaultGemmaPreTrainedModel._supports_sdpa True in
	// 4.57.0, 4.57.1, 5.0.0, 5.12.0, 5.18.0 and 5.20.0, False, "sdpa does
	// not support softcapping", in 5.21.0, 5.23.0 and 5.25.0).
	{modelType: "vaultgemma", prefix: "VaultGemma", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 57}, sdpaUntil: [2]int{5, 21}},
	// gemma3_text: the text model of gemma3 (families_vl.go), of the same
	// release: the 4.50.0 wheel is the first with models/gemma3.
	{modelType: "gemma3_text", prefix: "Gemma3", base: "model", heads: decoderHeads, build: buildDecoder, since: [2]int{4, 50}},
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
}

// encoderHeads are BERT's and RoBERTa's model classes, the masked LM first.
var encoderHeads = []hfHead{headMaskedLM, headBase, headSeqCls, headTokenCls}
