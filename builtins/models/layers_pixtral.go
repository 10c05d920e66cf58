package models

import (
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
)

// pixtralLayerBuiltins is Mistral 3's vision tower and projector
// (hf_config builds the same sim layer from a mistral3 config.json;
// sim/hf/mistral3.go).
func pixtralLayerBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "pixtral_vision",
		Sig: "pixtral_vision(dim, depth, heads, hidden, text_dim, image=1540, patch=14, merge=2, act=\"swiglu\", proj_act=\"gelu\", " +
			"proj_bias=False, impl=\"flash\")",
		Doc: "Mistral 3's vision tower (PixtralVisionModel, named vision_tower) and its projector (multi_modal_projector): each " +
			"image of train(images=(count, height, width)) is scaled down so its longer side is at most image pixels and each side " +
			"rounded up to a multiple of patch*merge, cut into patch x patch patches embedded by patch_conv (a Conv2d without " +
			"bias); every image's patches run as one sequence: ln_pre, then depth layers of RMSNorm, attention (heads, q, k, v, o " +
			"without biases, 2-D rotary) and a gated MLP of hidden units (act: \"swiglu\" or \"geglu\"); the projector's RMSNorm, " +
			"merge x merge patches merged by merging_layer, linear_1, proj_act, linear_2 to text_dim (biases when proj_bias): one " +
			"token a merged patch, which replaces an image placeholder of the text embeddings (place it after the embedding). " +
			"impl=\"sdpa\" and \"eager\" mask each image to itself with one [1, 1, patches, patches] mask over all the " +
			"micro-batch's patches, which every layer keeps; \"flash\" runs image by image. Without images the weights are held " +
			"and nothing runs.",
		Fn: pixtralVisionFn,
	}}
}

// pixtralVisionKeywords name the tower's checked inputs.
var pixtralVisionKeywords = map[nn.Field]string{
	nn.FieldDim: "dim", nn.FieldDepth: "depth", nn.FieldHeads: "heads", nn.FieldHidden: "hidden", nn.FieldTextDim: "text_dim",
	nn.FieldImage: "image", nn.FieldPatch: "patch", nn.FieldMerge: "merge", nn.FieldInChans: "the input channels (3)", nn.FieldImpl: "impl",
}

func pixtralVisionFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, depth, heads, hidden, textDim starlark.Value
	image, patch, merge := starlark.Value(starlark.MakeInt(1540)), starlark.Value(starlark.MakeInt(14)), starlark.Value(starlark.MakeInt(2))
	act, projAct, impl := "swiglu", "gelu", "flash"
	var projBias bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "depth", &depth, "heads", &heads, "hidden", &hidden,
		"text_dim", &textDim, "image?", &image, "patch?", &patch, "merge?", &merge, "act?", &act, "proj_act?", &projAct,
		"proj_bias?", &projBias, "impl?", &impl); err != nil {
		return nil, err
	}
	v := &nn.PixtralVision{Channels: 3, Act: act, ProjAct: projAct, ProjBias: projBias, Impl: impl}
	if err := ints(intArg{dim, "dim", &v.Dim}, intArg{depth, "depth", &v.Layers}, intArg{heads, "heads", &v.Heads},
		intArg{hidden, "hidden", &v.Inter}, intArg{textDim, "text_dim", &v.TextDim}, intArg{image, "image", &v.Image},
		intArg{patch, "patch", &v.Patch}, intArg{merge, "merge", &v.Merge}); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, v, pixtralVisionKeywords)
}
