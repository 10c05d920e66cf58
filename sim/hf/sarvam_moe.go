package hf

// glm4MoEAliases is the attribute_map SarvamMoEConfig and Param2MoeConfig
// (the same map) add to Glm4MoeConfig's (transformers 5.25.0): the
// original checkpoints' key, and Glm4MoeConfig's it sets.
//
// The two are the model types transformers runs as Glm4MoeForCausalLM
// under a config class of their own (models/auto/modeling_auto.py at
// 5.25.0 maps them to Glm4MoeModel and Glm4MoeForCausalLM; their folders
// hold a configuration file and no modelling), built by buildGLM4MoE:
// sarvam_moe (Sarvam AI's sarvam-30b, SarvamMoEConfig in
// models/sarvam_moe/configuration_sarvam_moe.py) and param2moe
// (BharatGen's Param2-17B-A2.4B, Param2MoeConfig in
// models/param2moe/configuration_param2moe.py). Each config class is
// Glm4MoeConfig with other defaults and these names (configClasses, read
// by classKeys); its __post_init__ sets partial_rotary_factor 1.0 (the
// whole head turned) where Glm4MoeConfig sets 0.5, and a
// partial_rotary_factor inside rope_parameters is the one transformers
// keeps (SarvamMoEConfig(rope_parameters={"partial_rotary_factor": 0.5})
// turns half), as for every class whose attention reads it.
var glm4MoEAliases = [][2]string{
	numLocalExperts,
	{"num_mtp_layers", "num_nextn_predict_layers"},
	{"num_experts", "n_routed_experts"},
	{"num_shared_experts", "n_shared_experts"},
	{"use_qkv_bias", "attention_bias"},
}
