package hf

// peftExperts is the table PEFT converts LoRA targets by on a transformers
// 5 model of each model_type (core.Model.PEFTExperts; core's
// lora_experts.go): transformers 5.25.0's _MODEL_TO_CONVERSION_PATTERN
// (conversion_mapping.py), the Mixtral-style and Qwen2-MoE-style entries,
// with PEFT's own "mixtral" entry (peft/utils/transformers_weight_conversion.py
// at 0.21.2). qwen2_moe itself is no key of that map, so PEFT converts
// nothing of Qwen2-MoE (nor of gpt_oss, phimoe, granitemoe, jamba,
// llama4, lfm2_moe, qwen3_vl_moe, nor sarvam_moe and param2moe, whose conversion is
// registered by model_type alone: their 3-D experts get no adapters).
var peftExperts = map[string]string{
	"mixtral": "mixtral", "minimax": "mixtral", "minimax_m2": "mixtral",
	"afmoe": "qwen2_moe", "deepseek_v2": "qwen2_moe", "deepseek_v3": "qwen2_moe", "deepseek_v32": "qwen2_moe",
	"dots1": "qwen2_moe", "ernie4_5_moe": "qwen2_moe", "glm4_moe": "qwen2_moe", "glm4_moe_lite": "qwen2_moe",
	"glm_moe_dsa": "qwen2_moe", "glm4v_moe": "qwen2_moe", "longcat_flash": "qwen2_moe", "solar_open": "qwen2_moe",
	"mellum": "qwen2_moe", "qwen3_moe": "qwen2_moe", "beam": "qwen2_moe", "qwen3_omni_moe": "qwen2_moe",
	"qwen3_next": "qwen2_moe", "hunyuan_v1_moe": "qwen2_moe", "flex_olmo": "qwen2_moe", "olmoe": "qwen2_moe",
	"sarvam_mla": "qwen2_moe", "exaone_moe": "qwen2_moe", "cohere2_moe": "qwen2_moe",
}
