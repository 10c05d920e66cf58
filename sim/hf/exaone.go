package hf

import "github.com/memsh/memsh/sim/core"

// buildExaone builds EXAONE 3.0 and 3.5 (model_type exaone:
// LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct, EXAONE-3.5-2.4B, -7.8B and
// -32B-Instruct) as transformers builds them from 5.24: the model class
// is LlamaForCausalLM (models/auto/modeling_auto.py maps exaone to it;
// conversion_mapping.py renames the checkpoints' transformer.h.N.attn.
// attention.* to model.layers.N.self_attn.*), its config ExaoneConfig,
// LlamaConfig with the keys EXAONE's config.json writes read through
// exaoneAliases. The checkpoints' architectures[0], ExaoneForCausalLM (the
// remote code's class), is read as that class. buildDecoder builds it.
func buildExaone(c *hfConfig, attn string, head hfHead) *core.Model {
	raw := make(map[string]any, len(c.raw))
	for k, v := range c.raw {
		raw[k] = v
	}
	for _, a := range exaoneAliases {
		v, ok := c.raw[a[0]]
		if !ok {
			continue
		}
		if _, both := c.raw[a[1]]; both {
			c.fail(a[0], "and %q are both set: ExaoneConfig reads %s as %s (attribute_map); keep one", a[1], a[0], a[1])
			return nil
		}
		raw[a[1]] = v
	}
	c.raw = raw
	return buildDecoder(c, attn, head)
}

// exaoneAliases is ExaoneConfig.attribute_map (models/exaone/
// configuration_exaone.py at transformers 5.25.0): EXAONE's key, and
// LlamaConfig's it sets.
var exaoneAliases = [][2]string{
	{"num_layers", "num_hidden_layers"},
	{"layer_norm_epsilon", "rms_norm_eps"},
	{"activation_function", "hidden_act"},
}
