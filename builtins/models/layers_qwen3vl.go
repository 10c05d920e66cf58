package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
)

// qwen3VLLayerBuiltins are Qwen3-VL's layer kinds (hf_config builds the
// same sim layers from a qwen3_vl config.json; sim/hf/qwen3vl.go).
func qwen3VLLayerBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "qwen3_vision_tower",
			Sig: "qwen3_vision_tower(dim, depth, heads, hidden, text_dim, patch=16, temporal_patch=2, merge=2, positions=2304, " +
				"deepstack=[], impl=\"flash\", name=None)",
			Doc: "Qwen3-VL's vision tower (Qwen3VLVisionModel; Qwen3.5's without deepstack), named visual: each image of " +
				"train(images=(count, height, width)) is resized to a multiple of patch*merge pixels, cut into patch x patch " +
				"(x temporal_patch) patches embedded by patch_embed (a Conv3d with bias), plus pos_embed, a learned square grid " +
				"of positions resampled to the image (four bilinear taps a patch); depth blocks of LayerNorm, attention (heads, " +
				"qkv and proj with biases, 2-D rotary, each image whole) and mlp (linear_fc1, GELU, linear_fc2 of hidden units); " +
				"the merger turns merge x merge patches into one token of text_dim, which replaces an image placeholder of the " +
				"text embeddings (place it after the embedding). After each block listed in deepstack, deepstack_merger_list.j " +
				"merges its output into a feature that deepstack_add(j) adds to the hidden states at the image positions " +
				"(after decoder layer j, as Qwen3-VL does); deepstack_end() after the final norm keeps the features until there. " +
				"impl=\"flash\" runs every image in one varlen kernel, \"sdpa\" one kernel per image and concatenates the " +
				"outputs; eager is not modelled. Without images the weights are held and nothing runs.",
			Fn: qwen3VisionTowerFn,
		},
		{
			Name: "deepstack_add",
			Sig:  "deepstack_add(index)",
			Doc: "Qwen3-VL's DeepStack add (Qwen3VLTextModel._deepstack_process): the hidden states cloned, and the " +
				"feature index of qwen3_vision_tower(deepstack=...) added at the image positions; it keeps the placeholder " +
				"mask (already kept by the image tokens' join). Place it after decoder layer index (sequential(block, " +
				"deepstack_add(i)) in the layers' repeat); it is no module: its op runs in the repeat's parent's module, as the text model's forward runs it between its layers. Without images, or past the tower's features, it passes its input through.",
			Fn: deepstackAddFn,
		},
		{
			Name: "deepstack_end",
			Sig:  "deepstack_end()",
			Doc: "Where Qwen3-VL's model forward returns: the deepstack features stay referenced until here (place it " +
				"after the text model's final norm). It passes its input through.",
			Fn: deepstackEndFn,
		},
	}
}

// qwen3VisionTowerKeywords name the tower's checked inputs.
var qwen3VisionTowerKeywords = map[nn.Field]string{
	nn.FieldDim: "dim", nn.FieldDepth: "depth", nn.FieldHeads: "heads", nn.FieldHidden: "hidden", nn.FieldPatch: "patch",
	nn.FieldTemporal: "temporal_patch", nn.FieldInChans: "the input channels (3)", nn.FieldMerge: "merge", nn.FieldTextDim: "text_dim",
	nn.FieldPositions: "positions", nn.FieldDeepstack: "deepstack", nn.FieldImpl: "impl",
}

func qwen3VisionTowerFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, depth, heads, hidden, textDim, name starlark.Value
	patch, temporal, merge := starlark.Value(starlark.MakeInt(16)), starlark.Value(starlark.MakeInt(2)), starlark.Value(starlark.MakeInt(2))
	positions := starlark.Value(starlark.MakeInt(2304))
	var deepstack *starlark.List
	impl := "flash"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "depth", &depth, "heads", &heads, "hidden", &hidden,
		"text_dim", &textDim, "patch?", &patch, "temporal_patch?", &temporal, "merge?", &merge, "positions?", &positions,
		"deepstack?", &deepstack, "impl?", &impl, "name?", &name); err != nil {
		return nil, err
	}
	v := &nn.Qwen3VisionTower{InChans: 3, Act: "gelu", Impl: impl}
	if err := ints(intArg{dim, "dim", &v.Dim}, intArg{depth, "depth", &v.Depth}, intArg{heads, "heads", &v.Heads},
		intArg{hidden, "hidden", &v.Inter}, intArg{textDim, "text_dim", &v.TextDim}, intArg{patch, "patch", &v.Patch},
		intArg{temporal, "temporal_patch", &v.Temporal}, intArg{merge, "merge", &v.Merge}, intArg{positions, "positions", &v.Positions}); err != nil {
		return nil, err
	}
	if deepstack != nil {
		for i := 0; i < deepstack.Len(); i++ {
			x, err := host.AsInt64(deepstack.Index(i), fmt.Sprintf("deepstack[%d]", i))
			if err != nil {
				return nil, err
			}
			v.Deepstack = append(v.Deepstack, x)
		}
	}
	var err error
	if v.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, v, qwen3VisionTowerKeywords)
}

func deepstackAddFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var index int
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "index", &index); err != nil {
		return nil, err
	}
	return newLayer(thread, &nn.DeepstackAdd{Index: index})
}

func deepstackEndFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return newLayer(thread, &nn.DeepstackEnd{})
}
