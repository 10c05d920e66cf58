package hf

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// buildIQuestCoder builds IQuest-Coder-V1 (model_type iquestcoder:
// IQuestLab/IQuest-Coder-V1-40B-Instruct and its siblings) as
// transformers builds it from 5.23: the model class is LlamaForCausalLM
// (models/auto/modeling_auto.py maps iquestcoder to it; models/iquestcoder
// holds only IQuestCoderConfig), its config IQuestCoderConfig, LlamaConfig
// with its own defaults (8 kv heads, head_dim 128: configClasses). The
// checkpoints' architectures[0], IQuestCoderForCausalLM (the remote
// code's class), is read as that class. buildDecoder builds it with
// Llama's switches; IQuestCoderConfig.validate_architecture refuses
// clip_qkv set and use_sliding_window true, options the remote code has
// and Llama's layer has not (models/iquestcoder/
// configuration_iquestcoder.py at 5.25.0), and so does this.
func buildIQuestCoder(c *hfConfig, attn string, head hfHead) *core.Model {
	if v, ok := c.raw["clip_qkv"]; ok && v != nil && c.err == nil {
		c.err = &units.Error{
			Msg:  fmt.Sprintf("%q is set (%s): IQuestCoderConfig refuses it (validate_architecture: Llama's layer, which transformers runs for iquestcoder, clamps nothing)", c.at("clip_qkv"), describeJSON(v)),
			Hint: `remove "clip_qkv" or set it to null: no released IQuest-Coder checkpoint sets it`,
		}
		return nil
	}
	if c.flag("use_sliding_window", false) && c.err == nil {
		c.err = &units.Error{
			Msg:  fmt.Sprintf("%q is true: IQuestCoderConfig refuses it (validate_architecture: Llama's layer, which transformers runs for iquestcoder, attends to every earlier token)", c.at("use_sliding_window")),
			Hint: `set "use_sliding_window": false or remove it: no released IQuest-Coder checkpoint slides`,
		}
		return nil
	}
	return buildDecoder(c, attn, head)
}
