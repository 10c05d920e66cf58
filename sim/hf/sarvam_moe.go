package hf

import (
	"encoding/json"

	"github.com/memsh/memsh/sim/core"
)

// buildGLM4MoEAlias builds the model types transformers runs as
// Glm4MoeForCausalLM under a config class of their own (models/auto/
// modeling_auto.py at 5.25.0 maps them to Glm4MoeModel and
// Glm4MoeForCausalLM; their folders hold a configuration file and no
// modelling): sarvam_moe (Sarvam AI's sarvam-30b, SarvamMoEConfig in
// models/sarvam_moe/configuration_sarvam_moe.py) and param2moe (BharatGen's
// Param2-17B-A2.4B, Param2MoeConfig in models/param2moe/
// configuration_param2moe.py). Each config class is
// Glm4MoeConfig with other defaults and more attribute_map names
// (glm4MoEAliases, glm4MoEAliasDefaults); its __post_init__ sets
// partial_rotary_factor 1.0 (the whole head turned) where Glm4MoeConfig
// sets 0.5, and a partial_rotary_factor inside rope_parameters is the
// one transformers keeps (SarvamMoEConfig(rope_parameters=
// {"partial_rotary_factor": 0.5}) turns half). buildGLM4MoE builds it.
func buildGLM4MoEAlias(c *hfConfig, attn string, head hfHead) *core.Model {
	raw := make(map[string]any, len(c.raw))
	for k, v := range c.raw {
		raw[k] = v
	}
	from := map[string]string{} // the key each alias was read from
	for _, a := range glm4MoEAliases {
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
			c.fail(a[0], "and %q are both set: %s reads %s as %s (attribute_map); keep one", other, glm4MoEAliasClass[c.modelType], a[0], a[1])
			return nil
		}
		from[a[1]] = a[0]
		raw[a[1]] = v
	}
	c.object("rope_parameters")
	if rp, ok := c.raw["rope_parameters"].(map[string]any); ok {
		if f, set := rp["partial_rotary_factor"]; set && f != nil {
			if top, both := c.raw["partial_rotary_factor"]; both && describeJSON(top) != describeJSON(f) {
				c.fail("partial_rotary_factor", "(%s) and rope_parameters' (%s) differ: keep one", describeJSON(top), describeJSON(f))
				return nil
			}
			raw["partial_rotary_factor"] = f
		}
	}
	for k, v := range glm4MoEAliasDefaults[c.modelType] {
		if _, ok := raw[k]; !ok {
			raw[k] = v
		}
	}
	c.raw = raw
	return buildGLM4MoE(c, attn, head)
}

// glm4MoEAliases is the attribute_map SarvamMoEConfig and Param2MoeConfig
// (the same map) add to Glm4MoeConfig's (transformers 5.25.0): the
// original checkpoints' key,
// and Glm4MoeConfig's it sets. num_local_experts and num_mtp_layers are
// Glm4MoeConfig's own names too.
var glm4MoEAliases = [][2]string{
	{"num_local_experts", "n_routed_experts"},
	{"num_mtp_layers", "num_nextn_predict_layers"},
	{"num_experts", "n_routed_experts"},
	{"num_shared_experts", "n_shared_experts"},
	{"use_qkv_bias", "attention_bias"},
}

// glm4MoEAliasClass names each model type's config class in errors.
var glm4MoEAliasClass = map[string]string{
	"sarvam_moe": "SarvamMoEConfig",
	"param2moe":  "Param2MoeConfig",
}

// glm4MoEAliasDefaults are the config class's defaults (transformers
// 5.25.0) where they differ from what buildGLM4MoE assumes for a missing
// key: partial_rotary_factor (its __post_init__), head_dim, use_qk_norm,
// n_routed_experts and n_shared_experts (SarvamMoEConfig: 64, true, 128,
// 1; Param2MoeConfig: 64, true, 64, 2, and tie_word_embeddings true),
// first_k_dense_replace 1 (Glm4MoeConfig's). The sizes memsh always
// asks for (hidden_size, moe_intermediate_size, num_experts_per_tok, ...)
// stay required.
var glm4MoEAliasDefaults = map[string]map[string]any{
	"sarvam_moe": {
		"partial_rotary_factor": json.Number("1"),
		"head_dim":              json.Number("64"),
		"use_qk_norm":           true,
		"n_routed_experts":      json.Number("128"),
		"n_shared_experts":      json.Number("1"),
		"first_k_dense_replace": json.Number("1"),
	},
	"param2moe": {
		"partial_rotary_factor": json.Number("1"),
		"head_dim":              json.Number("64"),
		"use_qk_norm":           true,
		"n_routed_experts":      json.Number("64"),
		"n_shared_experts":      json.Number("2"),
		"first_k_dense_replace": json.Number("1"),
		"tie_word_embeddings":   true,
	},
}
