package hf

// vlFamilies are the supported vision-language model types (hfFamily.vl:
// a ForConditionalGeneration class whose vision tower joins its text
// decoder, vl.go), in order; textFamilies holds the rest (families.go).
var vlFamilies = []hfFamily{
	// glm4v: the 4.53.0 wheel is the first with models/glm4v (its model
	// page: "added to Hugging Face Transformers on 2025-06-25"; 4.53.0 came
	// out the next day); glm4v_moe: 4.56 (its page: added on 2025-08-08,
	// after 4.55.0 of 2025-08-05). glm4v.go.
	{modelType: "glm4v", prefix: "Glm4v", base: "model", heads: vlHeads, build: buildGLM4V, vl: true, since: [2]int{4, 53}},
	{modelType: "glm4v_moe", prefix: "Glm4vMoe", base: "model", heads: vlHeads, build: buildGLM4V, vl: true, since: [2]int{4, 56}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// gemma3: the 4.50.0 wheel is the first with models/gemma3; no flash
	// path (Gemma3Model._supports_flash_attn = False: flash-attn drops the
	// bidirectional mask over image tokens). gemma3.go.
	{modelType: "gemma3", prefix: "Gemma3", base: "model", heads: vlHeads, build: buildGemma3, noFlash: true, vl: true, since: [2]int{4, 50}},
	// gemma3n, gemma3n_text: transformers 4.53.0 first built them (the
	// models' card: "Gemma 3n is supported starting from transformers
	// 4.53.0"), but memsh models the text model as 5.6.0 and later build
	// it (gemma3n.go): up to 5.5.0 (4.57.1, 5.0.0 and 5.5.0 checked) the
	// kv-shared layers have their own k_proj and v_proj and, in a forward
	// without a cache (training), compute their own keys and values;
	// 5.6.0 (to 5.25.0) drops them and passes shared_kv_states.
	{modelType: "gemma3n", prefix: "Gemma3n", base: "model", heads: vlHeads, build: buildGemma3n, vl: true, since: [2]int{5, 6}, sinceWhy: gemma3nSince},
	// gemma4, gemma4_text: the 5.5.0 wheel is the first with models/gemma4
	// (absent from the 5.4.0 wheel; llama.cpp's "update transformers to
	// 5.5.0", ggml-org/llama.cpp#21617: "5.5.0 includes support for Gemma4").
	// gemma4.go: the text model; its flash path stops at the full layers'
	// 512-wide heads (nn.Gemma4Attention).
	{modelType: "gemma4", prefix: "Gemma4", base: "model", heads: vlHeads, build: buildGemma4, vl: true, since: [2]int{5, 5}, experts: &hfExperts{}},
	// gemma4_unified, gemma4_unified_text: the 5.10.0 wheel is the first
	// with models/gemma4_unified (absent from 5.9.0; unzip -l); memsh
	// follows 5.25.0's modelling (gemma4_unified.go): no vision tower, no
	// per-layer embeddings, no MoE block.
	{modelType: "gemma4_unified", prefix: "Gemma4Unified", base: "model", heads: vlHeads, build: buildGemma4, vl: true, since: [2]int{5, 10}},
	{modelType: "idefics3", prefix: "Idefics3", base: "model", heads: vlHeads, build: buildIdefics3, vl: true, since: [2]int{4, 46}},
	{modelType: "internvl", prefix: "InternVL", base: "model", heads: vlHeads, build: buildInternVL, vl: true, since: [2]int{4, 52}},
	// kimi_k25: the 5.13.0 wheel is the first with models/kimi_k25 (absent
	// from 5.12.0); its text model only (kimi.go).
	{modelType: "kimi_k25", prefix: "Kimi_K25", base: "model", heads: vlHeads, build: buildKimiK25, noEager: true, vl: true, since: [2]int{5, 13}, experts: &hfExperts{weightsFP32: true, keepRouterSince: keepGateSince, keepScoreBias: true}},
	// llava: LlavaForConditionalGeneration, a CLIP tower and projector
	// before text_config's decoder (llava.go).
	{modelType: "llava", prefix: "Llava", base: "model", heads: vlHeads, build: buildLlava, vl: true},
	// llava_next, llava_onevision: LLaVA's projector on AnyRes tiles of a
	// CLIP tower, or of a SigLIP tower with anyres_max_9 (llava_next.go).
	// llava-v1.6-mistral-7b-hf's config.json was written by 4.39.0.dev0;
	// the llava-onevision-*-hf model cards ask for transformers >= 4.45.0.
	{modelType: "llava_next", prefix: "LlavaNext", base: "model", heads: vlHeads, build: buildLlavaNext, vl: true, since: [2]int{4, 39}},
	{modelType: "llava_onevision", prefix: "LlavaOnevision", base: "model", heads: vlHeads, build: buildLlavaOnevision, vl: true, since: [2]int{4, 45}},
	// llama4, llama4_text: the 4.51.0 wheel is the first with
	// models/llama4 (absent from 4.50.3); no flash path in 5.x (llama4.go).
	{modelType: "llama4", prefix: "Llama4", base: "model", heads: vlHeads, build: buildLlama4, noFlash: true, vl: true, since: [2]int{4, 51}},
	// lfm2_vl: LFM2-VL and LFM2.5-VL; models/lfm2_vl was on main by
	// 2025-09-26 (huggingface/transformers#41171's answer), first released
	// in 4.57.0. The lowering follows 5.25.0's (lfm2_vl.go); an LFM2-MoE
	// text model's experts are lfm2_moe's (5.0 and later only).
	{modelType: "lfm2_vl", prefix: "Lfm2Vl", base: "model", heads: vlHeads, build: buildLFM2VL, vl: true, since: [2]int{4, 57}, experts: &hfExperts{keepScoreBias: true}},
	// mistral3: the 4.50.0 wheel is the first with models/mistral3 (mistral3.go).
	{modelType: "mistral3", prefix: "Mistral3", base: "model", heads: vlHeads, build: buildMistral3, vl: true, since: [2]int{4, 50}},
	// mllama: the 4.45 wheels are the first with models/mllama (4.45.2 has
	// it, 4.44.2 not; unzip -l).
	{modelType: "mllama", prefix: "Mllama", base: "model", heads: vlHeads, build: buildMllama, vl: true, since: [2]int{4, 45}},
	// qwen2_vl: the 4.45.0 wheel is the first with models/qwen2_vl
	// (huggingface/transformers#33457, 2024-09-13: "release plan for 4.45?
	// We want to use qwen2-vl which is added two weeks ago"); qwen2_5_vl:
	// 4.49.0 (lmstudio-ai/mlx-engine#86: transformers "from source ...
	// until 4.49 is released"). vl.go.
	{modelType: "qwen2_vl", prefix: "Qwen2VL", base: "model", heads: vlHeads, build: buildQwen2VL, vl: true, since: [2]int{4, 45}},
	{modelType: "qwen2_5_vl", prefix: "Qwen2_5_VL", base: "model", heads: vlHeads, build: buildQwen25VL, vl: true, since: [2]int{4, 49}},
	// qwen3_vl, qwen3_vl_moe: transformers 4.57 (qwen3vl.go).
	{modelType: "qwen3_vl", prefix: "Qwen3VL", base: "model", heads: vlHeads, build: buildQwen3VL, vl: true, since: [2]int{4, 57}},
	{modelType: "qwen3_vl_moe", prefix: "Qwen3VLMoe", base: "model", heads: vlHeads, build: buildQwen3VL, vl: true, since: [2]int{4, 57}, experts: &hfExperts{router: "gate"}},
	{modelType: "smolvlm", prefix: "SmolVLM", base: "model", heads: vlHeads, build: buildIdefics3, vl: true, since: [2]int{4, 50}},
}
