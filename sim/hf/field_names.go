package hf

import (
	"errors"
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// The config.json keys each family names the inputs of its layers'
// checks by (nn.Field): the checks are sim/nn's, shared with the layer
// builtins, which name the same inputs by their keywords
// (builtins/models/field_names.go). hfKeywords are hf_config's own
// keywords that set a layer input. A map holds the keys some check
// names with a value hf_config's own reads let through
// (TestFieldKeysReached): a relation between inputs, or a size larger
// than memsh simulates (the towers' bounds); a Field only a positivity
// check names (a width, a state size, a conv kernel, ...) has none:
// hf_config reads every size as a positive integer first and says so
// itself. Mamba-1's mixer (mamba, jamba) has no key at all: its checks
// are positivity and the kernel, which attn= sets.
var (
	hfKeywords = map[nn.Field]string{nn.FieldImpl: "attn"}

	mlaKeys = map[nn.Field]string{
		nn.FieldQLora: "q_lora_rank", nn.FieldRopeDim: "qk_rope_head_dim", nn.FieldIndexHeadDim: "index_head_dim",
	}
	gatedDeltaNetKeys  = map[nn.Field]string{nn.FieldKeyHeads: "linear_num_key_heads", nn.FieldValueHeads: "linear_num_value_heads"}
	mamba2Keys         = map[nn.Field]string{nn.FieldHeads: "num_heads", nn.FieldGroups: "n_groups"}
	nemotronMamba2Keys = map[nn.Field]string{nn.FieldHeads: "mamba_num_heads", nn.FieldGroups: "n_groups"}
	mllamaVisionKeys   = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "attention_heads", nn.FieldImage: "image_size", nn.FieldPatch: "patch_size",
		nn.FieldOutputDim: "vision_output_dim", nn.FieldIntermediate: "intermediate_layers_indices", nn.FieldHidden: "intermediate_size",
		nn.FieldDepth: "num_hidden_layers", nn.FieldGlobalLayers: "num_global_layers", nn.FieldTiles: "max_num_tiles",
		nn.FieldInChans: "num_channels", nn.FieldAspects: "supported_aspect_ratios",
	}
	visionTowerKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "num_heads", nn.FieldPatch: "patch_size", nn.FieldMerge: "spatial_merge_size",
		nn.FieldWindow: "window_size", nn.FieldHidden: "intermediate_size", nn.FieldTemporal: "temporal_patch_size", nn.FieldInChans: "in_chans",
	}
	qwen3VisionTowerKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldHeads: "num_heads", nn.FieldPositions: "num_position_embeddings",
		nn.FieldDeepstack: "deepstack_visual_indexes", nn.FieldHidden: "intermediate_size", nn.FieldPatch: "patch_size",
		nn.FieldMerge: "spatial_merge_size", nn.FieldTemporal: "temporal_patch_size", nn.FieldInChans: "in_channels",
	}
	glm4vTowerKeys = map[nn.Field]string{
		nn.FieldDim: "hidden_size", nn.FieldDepth: "depth", nn.FieldHeads: "num_heads", nn.FieldHidden: "intermediate_size",
		nn.FieldPatch: "patch_size", nn.FieldMerge: "spatial_merge_size", nn.FieldTemporal: "temporal_patch_size",
		nn.FieldInChans: "in_channels", nn.FieldTextDim: "out_hidden_size", nn.FieldPositions: "image_size",
	}
	// textWidthKeys name a tower's projection width, the text model's
	// hidden_size (text_config's, for Llama 4 and Kimi K2.5).
	textWidthKeys = map[nn.Field]string{nn.FieldTextDim: "hidden_size"}
)

// moeKeys names an MoE block's routed experts and its experts per token
// by the family's keys: num_local_experts (Mixtral, PhiMoE, gpt-oss,
// Llama 4), num_experts (Qwen2-MoE, Qwen3-MoE, Qwen3-Next, Jamba, Gemma 4),
// n_routed_experts (DeepSeek-V3 and its kin); num_experts_per_tok, or
// Gemma 4's top_k_experts.
func moeKeys(experts, topK string) map[nn.Field]string {
	return map[nn.Field]string{nn.FieldExperts: experts, nn.FieldTopK: topK}
}

// checkLayer runs l's checks as it is built, so that a failed one names
// its inputs as config.json does: each key by its path in the file
// (text_config.linear_num_key_heads), hf_config's keywords (attn=) as
// such. The model's Validate runs the same checks again.
func (c *hfConfig) checkLayer(l core.Layer, keys map[nn.Field]string) {
	if c.err != nil {
		return
	}
	err := l.Validate("")
	var fe *nn.FieldError
	if !errors.As(err, &fe) {
		return // another error: the model's Validate reports it, at its path
	}
	named := fe.Named(func(f nn.Field) string {
		if k, ok := keys[f]; ok {
			return fmt.Sprintf("%q", c.at(k))
		}
		return hfKeywords[f]
	})
	c.err = &units.Error{Msg: named.Msg, Hint: named.Hint}
}

// objectKeys are the keys of one object of config.json (its hfConfig)
// that name a layer's inputs.
type objectKeys struct {
	c    *hfConfig
	keys map[nn.Field]string
}

// pathKeys are the keys of several objects, each at its path in the
// file (text_config.hidden_size): for checkLayer on the file's top
// object, whose paths are its keys.
func pathKeys(objects ...objectKeys) map[nn.Field]string {
	out := map[nn.Field]string{}
	for _, o := range objects {
		for f, k := range o.keys {
			out[f] = o.c.at(k)
		}
	}
	return out
}

// firstErr is the first of the objects' errors, nil for none.
func firstErr(objects ...*hfConfig) *units.Error {
	for _, o := range objects {
		if o.err != nil {
			return o.err
		}
	}
	return nil
}

// withKey is keys with f named key (a copy).
func withKey(keys map[nn.Field]string, f nn.Field, key string) map[nn.Field]string {
	out := make(map[nn.Field]string, len(keys))
	for k, v := range keys {
		out[k] = v
	}
	out[f] = key
	return out
}
