package hf

import (
	"encoding/json"
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// What a transformers config class says of the keys config.json leaves
// out or names otherwise. transformers reads config.json through the
// model type's config class: a key the file leaves out takes the class's
// default, an attribute_map alias sets the key it names. memsh's readers
// assume the common defaults (num_key_value_heads the attention heads,
// head_dim hidden_size / heads, no latent q projection, ...); where a
// class says otherwise it is here, so that a file without the key builds
// the class's model, not a silent other one
// (TestHFDefaultsAsTransformers holds one config of every class built
// with each key left out to transformers' parameter count).

// configClass is what one config class says of the keys its model reads:
// the names attribute_map gives them, the defaults its fields declare
// where they differ from what memsh's readers assume, and the keys it
// defaults to None that its model cannot be built without (classKeys).
type configClass struct {
	name string // the config class, for errors
	// aliases are attribute_map's names (and those __post_init__ re-routes):
	// the alias, then the key it sets
	aliases [][2]string
	// defaults are the class's defaults for the keys memsh reads (the
	// routed families' MoE keys, num_key_value_heads, head_dim, ...)
	// where they differ from what the readers assume. A key the class
	// defaults to None (Dots1Config's n_routed_experts,
	// DeepseekV2Config's num_experts_per_tok) is not here: an MoE layer
	// is not built without it, and config.json must set it.
	defaults map[string]any
	// required are keys the class defaults to None that transformers
	// cannot build the model without (NemotronConfig's
	// num_key_value_heads: its attention divides by it): a file that
	// leaves one out is refused, as transformers fails on it.
	required []string
	// rotary: the attention reads partial_rotary_factor, where the one
	// inside rope_parameters wins (PreTrainedConfig.convert_rope_params_to_dict
	// at 5.25.0: rope_parameters' own first, a non-empty rope_scaling
	// replacing rope_parameters, then the key, then the class's default).
	rotary bool
}

// peftMambaTypes are the model types on which PEFT refuses LoRA on a
// module named out_proj or conv1d (peft/tuners/tuners_utils.py
// _check_lora_target_modules_mamba at 0.21.2: the Mamba kernels read
// those weights themselves), which core.Model.PEFTMamba carries.
var peftMambaTypes = map[string]bool{"falcon_h1": true, "mamba": true, "mamba2": true, "falcon_mamba": true, "nemotron_h": true}

// num is a JSON number as config.json holds it (json.Number("64")).
type num = json.Number

// routedDefaults are the defaults the classes below share, at
// transformers 5.25.0, before each class's own: the keys the routed
// reader takes, with the values every one of these classes gives them
// except where its entry says otherwise.
func routedDefaults(own map[string]any) map[string]any {
	out := map[string]any{"n_shared_experts": num("1"), "norm_topk_prob": true, "num_nextn_predict_layers": num("0")}
	for k, v := range own {
		out[k] = v
	}
	return out
}

// numLocalExperts is attribute_map's num_local_experts, which every
// class below has.
var numLocalExperts = [2]string{"num_local_experts", "n_routed_experts"}

// configClasses are the config classes whose keys' names or defaults
// differ from what memsh's readers assume, by the model_type config.json
// names (a text_config's own where a family reads one: glm4v_moe_text is
// Glm4vMoeConfig's text_config; Kimi K2.5's text_config is a
// DeepseekV3Config), each from its configuration file in transformers
// 5.25.0 (models/<type>/configuration_<type>.py): first buildRoutedAt's
// families (DeepSeek-V3's layout), then the others.
var configClasses = map[string]*configClass{
	"deepseek_v2": {name: "DeepseekV2Config", aliases: [][2]string{{"num_experts", "n_routed_experts"}},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("64"), "n_shared_experts": num("2"), "moe_intermediate_size": num("1407"),
			"intermediate_size": num("11008"), "first_k_dense_replace": num("0"), "norm_topk_prob": false,
			"q_lora_rank": num("1536"), "kv_lora_rank": num("512"), "qk_nope_head_dim": num("128"), "qk_rope_head_dim": num("64"), "v_head_dim": num("128")})},
	"deepseek_v3": {name: "DeepseekV3Config", aliases: [][2]string{numLocalExperts, {"num_mtp_layers", "num_nextn_predict_layers"}},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("256"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("2048"),
			"intermediate_size": num("18432"), "first_k_dense_replace": num("3"), "num_nextn_predict_layers": num("1"), "q_lora_rank": num("1536"), "kv_lora_rank": num("512"), "qk_nope_head_dim": num("128"), "qk_rope_head_dim": num("64"), "v_head_dim": num("128")})},
	// AXK1Config: DeepseekV3Config's keys with A.X-K1's sizes; no MTP
	// layers (num_mtp_layers is no field of it)
	"axk1": {name: "AXK1Config", aliases: [][2]string{numLocalExperts},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("192"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("2048"),
			"intermediate_size": num("18432"), "q_lora_rank": num("1536"), "kv_lora_rank": num("512"), "qk_nope_head_dim": num("128"), "qk_rope_head_dim": num("64"), "v_head_dim": num("128")})},
	// AXK2Config: DeepseekV32Config's keys with A.X-K2-Light's sizes; its
	// __post_init__ is PreTrainedConfig's (no num_experts re-routing)
	"axk2": {name: "AXK2Config", aliases: [][2]string{numLocalExperts},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("128"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("512"),
			"intermediate_size": num("5120"), "q_lora_rank": num("384"), "kv_lora_rank": num("128"), "qk_nope_head_dim": num("64"), "qk_rope_head_dim": num("32"), "v_head_dim": num("64"),
			"index_n_heads": num("16"), "index_head_dim": num("128"), "index_topk": num("2048"), "gated_norm_rank": num("16")})},
	// DeepseekV32Config and GlmMoeDsaConfig re-route a num_experts
	// kwarg to n_routed_experts in __post_init__
	"deepseek_v32": {name: "DeepseekV32Config", aliases: [][2]string{numLocalExperts, {"num_experts", "n_routed_experts"}},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("256"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("2048"),
			"intermediate_size": num("18432"), "first_k_dense_replace": num("3"), "q_lora_rank": num("1536"), "kv_lora_rank": num("512"), "qk_nope_head_dim": num("128"), "qk_rope_head_dim": num("64"), "v_head_dim": num("128")})},
	// Dots3NoteTextConfig (DeepseekV32Config's fields with Dots 3 Note's
	// defaults; its __post_init__ is PreTrainedConfig's, no num_experts
	// re-routing): num_key_value_heads 128, not the heads
	"dots3_note_text": {name: "Dots3NoteTextConfig", aliases: [][2]string{numLocalExperts},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("256"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("1536"),
			"intermediate_size": num("13824"), "q_lora_rank": num("1024"), "kv_lora_rank": num("512"), "qk_nope_head_dim": num("128"), "qk_rope_head_dim": num("64"), "v_head_dim": num("128"),
			"num_key_value_heads": num("128"), "head_dim": num("256"), "index_n_heads": num("64"), "index_head_dim": num("128"), "index_topk": num("2048")})},
	"glm_moe_dsa": {name: "GlmMoeDsaConfig", aliases: [][2]string{numLocalExperts, {"num_experts", "n_routed_experts"}},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("256"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("2048"),
			"intermediate_size": num("12288"), "first_k_dense_replace": num("3"), "q_lora_rank": num("2048"), "kv_lora_rank": num("512"), "qk_nope_head_dim": num("192"), "qk_rope_head_dim": num("64"), "v_head_dim": num("256")})},
	// Glm4MoeConfig's __post_init__ sets partial_rotary_factor 0.5
	"glm4_moe": {name: "Glm4MoeConfig", aliases: [][2]string{numLocalExperts, {"num_mtp_layers", "num_nextn_predict_layers"}}, rotary: true,
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("128"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("1408"),
			"intermediate_size": num("10944"), "first_k_dense_replace": num("1"), "num_nextn_predict_layers": num("1"), "partial_rotary_factor": num("0.5"),
			"num_key_value_heads": num("8")})},
	// Glm4MoeLiteConfig has no first_k_dense_replace: firstDense
	"glm4_moe_lite": {name: "Glm4MoeLiteConfig", aliases: [][2]string{numLocalExperts},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("64"), "num_experts_per_tok": num("4"), "moe_intermediate_size": num("1536"),
			"intermediate_size": num("10240"), "q_lora_rank": num("768"), "kv_lora_rank": num("512"), "qk_nope_head_dim": num("192"), "qk_rope_head_dim": num("64"), "v_head_dim": num("256")})},
	// Glm4vMoeTextConfig: q, k and v biased by default
	"glm4v_moe_text": {name: "Glm4vMoeTextConfig", aliases: [][2]string{numLocalExperts}, rotary: true,
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("128"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("1408"),
			"intermediate_size": num("10944"), "first_k_dense_replace": num("1"), "attention_bias": true, "partial_rotary_factor": num("0.5"),
			"num_key_value_heads": num("8")})},
	// Dots1Config defaults n_routed_experts, n_shared_experts and
	// num_experts_per_tok to None
	"dots1": {name: "Dots1Config", aliases: [][2]string{numLocalExperts},
		defaults: map[string]any{"moe_intermediate_size": num("1408"), "intermediate_size": num("10944"), "first_k_dense_replace": num("0"),
			"norm_topk_prob": false, "num_nextn_predict_layers": num("0"), "num_key_value_heads": num("32")}},
	"mistral4": {name: "Mistral4Config", aliases: [][2]string{numLocalExperts},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("128"), "num_experts_per_tok": num("4"), "moe_intermediate_size": num("2048"),
			"intermediate_size": num("12288"), "first_k_dense_replace": num("0"), "q_lora_rank": num("1024"), "kv_lora_rank": num("256"), "qk_nope_head_dim": num("64"), "qk_rope_head_dim": num("64"), "v_head_dim": num("128")})},
	// MiMoV2FlashConfig (buildMiMoV2Flash reads routedMoE): its own head
	// widths and window, and no n_shared_experts (MiMoV2FlashMoE has none)
	"flint": {name: "FlintConfig", defaults: map[string]any{"num_key_value_heads": num("4"), "head_dim": num("128"), "sliding_window": num("513"),
		"num_experts": num("256"), "num_experts_per_tok": num("6"), "moe_intermediate_size": num("512"), "shared_expert_intermediate_size": num("1024"),
		"intermediate_size": num("6144"), "norm_topk_prob": true}},
	"mimo_v2_flash": {name: "MiMoV2FlashConfig", aliases: [][2]string{numLocalExperts},
		defaults: map[string]any{"num_key_value_heads": num("4"), "head_dim": num("192"), "v_head_dim": num("128"), "sliding_window": num("129"),
			"n_routed_experts": num("256"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("2048"), "intermediate_size": num("16384"),
			"norm_topk_prob": true}},
	// ExaoneMoeConfig (buildExaoneMoe reads routedMoE, not buildRoutedAt)
	"exaone_moe": {name: "ExaoneMoeConfig",
		defaults: map[string]any{"num_experts": num("64"), "num_shared_experts": num("1"), "num_experts_per_tok": num("8"),
			"moe_intermediate_size": num("1024"), "intermediate_size": num("16384"), "first_k_dense_replace": num("1"), "norm_topk_prob": true,
			"num_key_value_heads": num("32")}},
	// SolarOpenConfig has no intermediate_size or first_k_dense_replace
	"solar_open": {name: "SolarOpenConfig", aliases: [][2]string{numLocalExperts}, rotary: true,
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("128"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("1280"),
			"num_key_value_heads": num("8")})},
	// SarvamMoEConfig and Param2MoeConfig are Glm4MoeConfig with other
	// defaults and more names; their __post_init__ sets
	// partial_rotary_factor 1.0
	"sarvam_moe": {name: "SarvamMoEConfig", aliases: glm4MoEAliases, rotary: true,
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("128"), "num_experts_per_tok": num("6"), "moe_intermediate_size": num("1024"),
			"intermediate_size": num("8192"), "first_k_dense_replace": num("1"), "partial_rotary_factor": num("1"), "head_dim": num("64"), "use_qk_norm": true})},
	// SarvamMLAConfig is DeepseekV3Config with other defaults (q_lora_rank
	// None: q projected whole) and the original checkpoints' names (its
	// __post_init__ drops their head_dim and q_head_dim, which no reader
	// here takes)
	"sarvam_mla": {name: "SarvamMLAConfig", aliases: [][2]string{numLocalExperts, {"num_mtp_layers", "num_nextn_predict_layers"},
		{"num_experts", "n_routed_experts"}, {"num_shared_experts", "n_shared_experts"}},
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("128"), "num_experts_per_tok": num("8"), "moe_intermediate_size": num("2048"),
			"intermediate_size": num("16384"), "first_k_dense_replace": num("1"),
			"kv_lora_rank": num("512"), "qk_nope_head_dim": num("128"), "qk_rope_head_dim": num("64"), "v_head_dim": num("128")})},
	// MiniCPM5MoeConfig (buildMiniCPM5Moe reads routedMoE, not
	// buildRoutedAt): its expert keys, intermediate_size and head_dim
	// (null: hidden_size / num_attention_heads, its __post_init__)
	"minicpm5_moe": {name: "MiniCPM5MoeConfig", aliases: [][2]string{numLocalExperts},
		defaults: map[string]any{"n_routed_experts": num("160"), "n_shared_experts": num("1"), "num_experts_per_tok": num("16"),
			"moe_intermediate_size": num("512"), "intermediate_size": num("8192"), "norm_topk_prob": true,
			"num_key_value_heads": num("2"), "head_dim": num("128")}},
	// MiniCPM3Config (buildMiniCPM3): its latent sizes, q through
	// q_lora_rank (memsh's reader assumes a plain q_proj without it) and
	// intermediate_size; v_head_dim None is hidden_size / heads (read in
	// deepSeekMLA), tie_word_embeddings true (buildMiniCPM3's default)
	"minicpm3": {name: "MiniCPM3Config", defaults: map[string]any{"intermediate_size": num("6400"),
		"q_lora_rank": num("768"), "kv_lora_rank": num("256"), "qk_nope_head_dim": num("64"), "qk_rope_head_dim": num("32")}},
	// YoutuConfig (buildYoutu): DeepseekV3Config's latent sizes without
	// its MoE keys, and intermediate_size
	"youtu": {name: "YoutuConfig", defaults: map[string]any{"intermediate_size": num("6144"),
		"q_lora_rank": num("1536"), "kv_lora_rank": num("512"), "qk_nope_head_dim": num("128"), "qk_rope_head_dim": num("64"), "v_head_dim": num("128")}},
	// PersimmonConfig's __post_init__ sets partial_rotary_factor 0.5
	"persimmon": {name: "PersimmonConfig", rotary: true, defaults: map[string]any{"partial_rotary_factor": num("0.5")}},
	"param2moe": {name: "Param2MoeConfig", aliases: glm4MoEAliases, rotary: true,
		defaults: routedDefaults(map[string]any{"n_routed_experts": num("64"), "n_shared_experts": num("2"), "num_experts_per_tok": num("6"),
			"moe_intermediate_size": num("2048"), "intermediate_size": num("9216"), "first_k_dense_replace": num("1"), "partial_rotary_factor": num("1"),
			"head_dim": num("64"), "use_qk_norm": true, "tie_word_embeddings": true, "num_key_value_heads": num("8")})},

	// MellumConfig: Qwen3-MoE's keys under its own defaults and aliases
	"mellum": {name: "MellumConfig", aliases: [][2]string{{"num_local_experts", "num_experts"}, {"num_mtp_layers", "num_nextn_predict_layers"}},
		defaults: map[string]any{"num_key_value_heads": num("4"), "num_experts": num("64"), "num_experts_per_tok": num("8"),
			"moe_intermediate_size": num("896"), "intermediate_size": num("7168"), "norm_topk_prob": true}},

	// Kolibri1Config: Qwen3-MoE's keys under its own defaults; num_experts
	// read as num_local_experts (attribute_map)
	"kolibri1": {name: "Kolibri1Config", aliases: [][2]string{{"num_local_experts", "num_experts"}},
		defaults: map[string]any{"num_key_value_heads": num("4"), "head_dim": num("128"), "num_experts": num("384"), "num_experts_per_tok": num("6"),
			"moe_intermediate_size": num("512"), "shared_expert_intermediate_size": num("512"), "sliding_window": num("513")}},

	// InternLM3Config (LlamaForCausalLM's config for internlm3): its
	// attribute_map names the biases qkv_bias and bias
	"internlm3": {name: "InternLM3Config", aliases: [][2]string{{"qkv_bias", "attention_bias"}, {"bias", "mlp_bias"}},
		defaults: map[string]any{"num_key_value_heads": num("2"), "head_dim": num("128")}},
	// IQuestCoderConfig (LlamaForCausalLM's config for iquestcoder)
	"iquestcoder": {name: "IQuestCoderConfig", defaults: map[string]any{"num_key_value_heads": num("8"), "head_dim": num("128")}},

	// The others: num_key_value_heads where the class's default is not
	// the attention heads (a fixed count), head_dim where it is not
	// hidden_size / heads, and the MoE families' expert counts.
	"llama4_text":  {name: "Llama4TextConfig", defaults: map[string]any{"num_key_value_heads": num("8"), "head_dim": num("128")}},
	"bamba":        {name: "BambaConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"ernie4_5_moe": {name: "Ernie4_5_MoeConfig", defaults: map[string]any{"num_key_value_heads": num("4")}},
	"ernie4_5":     {name: "Ernie4_5Config", defaults: map[string]any{"num_key_value_heads": num("2")}},
	"cwm":          {name: "CwmConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"exaone":       {name: "ExaoneConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"exaone4":      {name: "Exaone4Config", defaults: map[string]any{"num_key_value_heads": num("32")}},
	"falcon_h1":    {name: "FalconH1Config", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"gemma2":       {name: "Gemma2Config", defaults: map[string]any{"num_key_value_heads": num("4")}},
	"gemma4_text":  {name: "Gemma4TextConfig", defaults: map[string]any{"num_key_value_heads": num("4")}},
	"gemma":        {name: "GemmaConfig", defaults: map[string]any{"num_key_value_heads": num("16")}},
	"glm":          {name: "GlmConfig", defaults: map[string]any{"num_key_value_heads": num("2"), "head_dim": num("128")}},
	"glm4":         {name: "Glm4Config", defaults: map[string]any{"num_key_value_heads": num("2"), "head_dim": num("128")}},
	"glm4v_text":   {name: "Glm4vTextConfig", defaults: map[string]any{"num_key_value_heads": num("2")}},
	"granite_swa":  {name: "GraniteSWAConfig", defaults: map[string]any{"num_key_value_heads": num("4")}},
	// GPTNeoConfig's attribute_map; its defaults are buildGPTNeo's
	"gpt_neo": {name: "GPTNeoConfig", aliases: [][2]string{{"num_attention_heads", "num_heads"}, {"num_hidden_layers", "num_layers"}}},
	// XGLMConfig's attribute_map; its defaults are buildXGLM's
	"xglm":              {name: "XGLMConfig", aliases: [][2]string{{"num_attention_heads", "attention_heads"}, {"hidden_size", "d_model"}, {"num_hidden_layers", "num_layers"}}},
	"gpt_oss":           {name: "GptOssConfig", defaults: map[string]any{"num_key_value_heads": num("8"), "head_dim": num("64")}},
	"helium":            {name: "HeliumConfig", defaults: map[string]any{"num_key_value_heads": num("20")}},
	"hrm_text":          {name: "HrmTextConfig", defaults: map[string]any{"head_dim": num("128")}},
	"hy_v3":             {name: "HYV3Config", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"jais2":             {name: "Jais2Config", defaults: map[string]any{"attention_bias": true, "mlp_bias": true}},
	"jamba":             {name: "JambaConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"laguna":            {name: "LagunaConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"lara_mini":         {name: "LaraMiniConfig", defaults: map[string]any{"num_key_value_heads": num("4"), "head_dim": num("128"), "sliding_window": num("512")}},
	"minimax":           {name: "MiniMaxConfig", aliases: [][2]string{{"num_experts", "num_local_experts"}}, defaults: map[string]any{"num_key_value_heads": num("8"), "num_local_experts": num("8"), "num_experts_per_tok": num("2"), "intermediate_size": num("14336")}},
	"minimax_m2":        {name: "MiniMaxM2Config", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"ministral":         {name: "MinistralConfig", defaults: map[string]any{"num_key_value_heads": num("8")}, required: []string{"head_dim"}},
	"ministral3":        {name: "Ministral3Config", defaults: map[string]any{"num_key_value_heads": num("8"), "head_dim": num("128")}},
	"mistral":           {name: "MistralConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"mixtral":           {name: "MixtralConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"mllama_text_model": {name: "MllamaTextConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"nemotron_h":        {name: "NemotronHConfig", defaults: map[string]any{"num_key_value_heads": num("8"), "head_dim": num("128"), "n_groups": num("8")}},
	"nemotron":          {name: "NemotronConfig", required: []string{"num_key_value_heads"}},
	"phimoe":            {name: "PhimoeConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"qwen2":             {name: "Qwen2Config", defaults: map[string]any{"num_key_value_heads": num("32")}},
	"qwen2_moe":         {name: "Qwen2MoeConfig", defaults: map[string]any{"num_key_value_heads": num("16"), "num_experts": num("60")}},
	"qwen2_vl_text":     {name: "Qwen2VLTextConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"qwen2_5_vl_text":   {name: "Qwen2_5_VLTextConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"qwen3_moe":         {name: "Qwen3MoeConfig", defaults: map[string]any{"num_key_value_heads": num("4"), "num_experts": num("128")}},
	"qwen3_next":        {name: "Qwen3NextConfig", defaults: map[string]any{"num_key_value_heads": num("2")}},
	"qwen3_vl_moe_text": {name: "Qwen3VLMoeTextConfig", defaults: map[string]any{"num_key_value_heads": num("16"), "num_experts": num("60")}},
	"qwen3_vl_text":     {name: "Qwen3VLTextConfig", defaults: map[string]any{"num_key_value_heads": num("32"), "head_dim": num("128")}},
	"qwen3_5_text":      {name: "Qwen3_5TextConfig", defaults: map[string]any{"num_key_value_heads": num("4")}},
	"qwen3_5_moe_text":  {name: "Qwen3_5MoeTextConfig", defaults: map[string]any{"num_key_value_heads": num("2")}},
	"seed_oss":          {name: "SeedOssConfig", defaults: map[string]any{"num_key_value_heads": num("8")}},
	"smollm3":           {name: "SmolLM3Config", defaults: map[string]any{"num_key_value_heads": num("4")}},
	"stablelm":          {name: "StableLmConfig", defaults: map[string]any{"num_key_value_heads": num("32")}},
	"starcoder2":        {name: "Starcoder2Config", defaults: map[string]any{"num_key_value_heads": num("2")}},
	"mamba2":            {name: "Mamba2Config", defaults: map[string]any{"n_groups": num("8")}},
	// MiniMax M3's text model (minimax_m3.go); its other defaults are the reader's.
	"minimax_m3_vl_text": {name: "MiniMaxM3VLTextConfig", aliases: [][2]string{{"num_experts", "num_local_experts"}}, rotary: true, defaults: map[string]any{"num_key_value_heads": num("4"), "head_dim": num("128")}},

	// BitNet b1.58 (bitnet.go): BitNetConfig's num_key_value_heads is 5.
	"bitnet": {name: "BitNetConfig", defaults: map[string]any{"num_key_value_heads": num("5")}},
	// Gemma 4 unified's text model (gemma4_unified.go).
	"gemma4_unified_text": {name: "Gemma4UnifiedTextConfig", defaults: map[string]any{"num_key_value_heads": num("4")}},
}

// classKeys reads config.json as the config class of model type mt (a
// configClasses entry; any other type is left alone) builds it: each
// alias read as the key it sets (one key set under two names is
// refused), rope_parameters' partial_rotary_factor as the key where the
// attention reads it (two that differ are refused), and the class's
// defaults where config.json leaves a key out. A key set to null stays
// null: the readers refuse it where they need a value.
func (c *hfConfig) classKeys(mt string) {
	rc := configClasses[mt]
	if rc == nil || c.err != nil {
		return
	}
	raw := cloneRaw(c.raw)
	from := map[string]string{} // the key each alias was read from
	for _, a := range rc.aliases {
		v, ok := c.raw[a[0]]
		if !ok {
			continue
		}
		other := a[1]
		if prev, dup := from[a[1]]; dup {
			other = prev
		} else if _, both := c.raw[a[1]]; !both {
			other = ""
		}
		if other != "" {
			c.fail(a[0], "and %q are both set: %s reads %s as %s (attribute_map); keep one", c.at(other), rc.name, a[0], a[1])
			return
		}
		from[a[1]] = a[0]
		raw[a[1]] = v
	}
	if rc.rotary {
		c.object("rope_parameters")
		c.object("rope_scaling")
		key := "rope_parameters"
		rp, _ := c.raw[key].(map[string]any)
		if rs, _ := c.raw["rope_scaling"].(map[string]any); len(rs) > 0 {
			key, rp = "rope_scaling", rs // rope_scaling, when set, replaces rope_parameters
		}
		if f, set := rp["partial_rotary_factor"]; set && f != nil {
			if top, both := c.raw["partial_rotary_factor"]; both && !sameNumber(top, f) {
				c.fail("partial_rotary_factor", "(%s) and %s' (%s) differ: keep one", describeJSON(top), key, describeJSON(f))
				return
			}
			raw["partial_rotary_factor"] = f
		}
	}
	for k, v := range rc.defaults {
		if _, ok := raw[k]; !ok {
			raw[k] = v
		}
	}
	for _, k := range rc.required {
		if _, ok := raw[k]; !ok {
			c.err = &units.Error{Msg: fmt.Sprintf("config.json has no %q: %s defaults it to None, with which transformers builds no model", c.at(k), rc.name),
				Hint: "is this the model's config.json (the one next to its weights on the hub)?"}
			return
		}
	}
	c.raw = raw
}

// sameNumber says whether two JSON values are one number (1 and 1.0
// alike), or else the same value.
func sameNumber(a, b any) bool {
	x, okA := a.(json.Number)
	y, okB := b.(json.Number)
	if okA && okB {
		fx, errX := x.Float64()
		fy, errY := y.Float64()
		if errX == nil && errY == nil {
			return fx == fy
		}
	}
	return describeJSON(a) == describeJSON(b)
}
