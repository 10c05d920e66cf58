package models

import (
	"errors"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
)

// The keywords each layer builtin names the inputs of its layer's checks
// by (nn.Field): the checks are sim/nn's, shared with hf_config, which
// names the same inputs by their config.json keys (sim/hf/field_names.go).
// TestFieldNames makes every check fail through each builtin.
var (
	mlaKeywords = map[nn.Field]string{
		nn.FieldDim: "dim", nn.FieldHeads: "heads", nn.FieldKVLora: "kv_lora_rank", nn.FieldQLora: "q_lora_rank",
		nn.FieldNope: "qk_nope_head_dim", nn.FieldRopeDim: "qk_rope_head_dim", nn.FieldVDim: "v_head_dim", nn.FieldImpl: "impl",
		nn.FieldIndexHeads: "index_heads", nn.FieldIndexHeadDim: "index_head_dim", nn.FieldIndexTopK: "index_topk",
	}
	gatedDeltaNetKeywords = map[nn.Field]string{
		nn.FieldDim: "dim", nn.FieldKeyHeads: "key_heads", nn.FieldValueHeads: "value_heads", nn.FieldKeyHeadDim: "key_head_dim",
		nn.FieldValueHeadDim: "value_head_dim", nn.FieldConvKernel: "conv_kernel", nn.FieldKernel: "kernel",
		nn.FieldChunk: "the chunk (64 tokens)",
	}
	mambaKeywords = map[nn.Field]string{
		nn.FieldDim: "dim", nn.FieldInner: "expand x dim", nn.FieldState: "state", nn.FieldConvKernel: "conv_kernel",
		nn.FieldDTRank: "dt_rank", nn.FieldMambaImpl: "impl",
	}
	mamba2Keywords = map[nn.Field]string{
		nn.FieldDim: "dim", nn.FieldHeads: "heads", nn.FieldHeadDim: "head_dim", nn.FieldGroups: "groups", nn.FieldState: "state",
		nn.FieldConvKernel: "conv_kernel", nn.FieldChunk: "chunk", nn.FieldInner: "heads x head_dim",
	}
	visionTowerKeywords = map[nn.Field]string{
		nn.FieldDim: "dim", nn.FieldDepth: "depth", nn.FieldHeads: "heads", nn.FieldHidden: "hidden", nn.FieldPatch: "patch",
		nn.FieldTemporal: "temporal_patch", nn.FieldInChans: "the input channels (3)", nn.FieldMerge: "merge", nn.FieldTextDim: "text_dim",
		nn.FieldWindow: "window", nn.FieldFullBlocks: "full_blocks", nn.FieldImpl: "impl",
	}
	gemma4AttentionKeywords = map[nn.Field]string{nn.FieldImpl: "impl"}
	moeKeywords             = map[nn.Field]string{nn.FieldExperts: "experts", nn.FieldTopK: "top_k"} // moe(), gemma4_moe()
)

// newNamedLayer is newLayer for a layer whose checks name nn.Fields: a
// failed check names them by keywords.
func newNamedLayer(thread *starlark.Thread, l core.Layer, keywords map[nn.Field]string) (starlark.Value, error) {
	v, err := newLayer(thread, l)
	var fe *nn.FieldError
	if errors.As(err, &fe) {
		return nil, fe.Named(func(f nn.Field) string { return keywords[f] })
	}
	return v, err
}
