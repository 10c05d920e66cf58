package hf

// hiddenHeadsClasses are the config classes, by model_type, whose
// validate_architecture refuses a hidden_size that is not a multiple of
// num_attention_heads whatever head_dim says (LlamaConfig's, and the
// classes that copy it: models/<type>/configuration_<type>.py at
// transformers 5.25.0). buildDecoder refuses such a config as they do.
var hiddenHeadsClasses = map[string]string{
	"llama":       "LlamaConfig",
	"aria_text":   "AriaTextConfig",
	"jais2":       "Jais2Config",
	"hyperclovax": "HyperCLOVAXConfig",
	"cwm":         "CwmConfig",
	"internlm3":   "InternLM3Config",
	"iquestcoder": "IQuestCoderConfig",
}
