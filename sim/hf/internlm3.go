package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// buildInternLM3 builds InternLM3 (model_type internlm3:
// internlm/internlm3-8b-instruct) as transformers builds it from 5.23:
// the model class is LlamaForCausalLM (models/auto/modeling_auto.py maps
// internlm3 to it; models/internlm3 holds only InternLM3Config), its
// config InternLM3Config, LlamaConfig with its own defaults (2 kv heads,
// head_dim 128: configClasses) and attribute_map's names for the biases,
// qkv_bias for attention_bias and bias for mlp_bias (classKeys). The
// checkpoints' architectures[0], InternLM3ForCausalLM (the remote code's
// class), is read as that class. buildDecoder builds it with Llama's
// switches; InternLM3Config.validate_architecture refuses biases that
// differ (Llama biases q, k, v and o by attention_bias alone), and so
// does this (models/internlm3/configuration_internlm3.py at 5.25.0).
func buildInternLM3(c *hfConfig, attn string, head hfHead) *core.Model {
	qkv, mlp := c.flag("attention_bias", false), c.flag("mlp_bias", false)
	if qkv != mlp && c.err == nil {
		c.err = &units.Error{
			Msg: fmt.Sprintf("%q (attention_bias, %t) and %q (mlp_bias, %t) differ: InternLM3Config refuses them (validate_architecture: Llama's layer, which InternLM3 runs, biases q, k, v and o by attention_bias and the MLP by mlp_bias)",
				c.at("qkv_bias"), qkv, c.at("bias"), mlp),
			Hint: `set "qkv_bias" and "bias" alike, as InternLM3's checkpoints do (both false)`,
		}
		return nil
	}
	return buildDecoder(c, attn, head)
}
