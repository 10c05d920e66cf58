package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// Gemma4AudioTower is the weights of Gemma 4's audio tower (E2B, E4B) and
// its multimodal embedder, as transformers 5.17 registers them
// (models/gemma4/modeling_gemma4.py: Gemma4AudioModel, a conformer, and
// Gemma4MultimodalEmbedder; model.audio_tower, model.embed_audio):
//
//   - subsample_conv_projection: two 3 x 3 Conv2d of stride 2 without bias
//     (1 to Channels[0], Channels[0] to Channels[1] channels), each with a
//     LayerNorm without bias, then input_proj_linear from Channels[0]/4 x
//     Channels[1] to hidden;
//   - Depth conformer layers: two feed-forward halves (feed_forward1 and 2:
//     pre and post norms, ffw_layer_1 to 4 x hidden, ffw_layer_2 back), the
//     chunked attention (q, k, v and post projections, relative_k_proj, a
//     per_dim_scale of head_dim), the light convolution (linear_start to 2
//     x hidden, a depthwise causal Conv1d of ConvKernel taps, linear_end,
//     pre and conv norms) and three norms;
//   - output_proj (with bias) to ProjDim, and embed_audio's projection (no
//     bias) from ProjDim to the language model's width.
//
// memsh models no audio input: train() has no knob for audio, so the
// tower runs nothing and only its weights (and, trained, their gradients
// and optimizer states) are counted, as a vision tower's are without
// images.
type Gemma4AudioTower struct {
	Dim, Depth, Heads int64
	Channels          [2]int64 // subsampling_conv_channels
	ConvKernel        int64
	ProjDim           int64 // output_proj_dims
	TextDim           int64
}

func (a *Gemma4AudioTower) Kind() string              { return "gemma4_audio_tower" }
func (a *Gemma4AudioTower) Label() string             { return "" }
func (a *Gemma4AudioTower) Children() []core.Layer    { return nil }
func (a *Gemma4AudioTower) Modules() []core.ModuleRow { return tensorModules(a.Kind(), a.weights) }
func (a *Gemma4AudioTower) InDim() int64              { return a.TextDim }
func (a *Gemma4AudioTower) OutDim() int64             { return a.TextDim }

func (a *Gemma4AudioTower) headDim() int64 { return a.Dim / a.Heads }

// weights is every parameter: its name under model, shape and role.
func (a *Gemma4AudioTower) weights(each tensorFn) {
	d, c0, c1 := a.Dim, a.Channels[0], a.Channels[1]
	inner := a.Heads * a.headDim()
	each("audio_tower.subsample_conv_projection.layer0.conv.weight", []int64{c0, 1, 3, 3}, core.RoleLinear)
	each("audio_tower.subsample_conv_projection.layer0.norm.weight", []int64{c0}, core.RoleNorm)
	each("audio_tower.subsample_conv_projection.layer1.conv.weight", []int64{c1, c0, 3, 3}, core.RoleLinear)
	each("audio_tower.subsample_conv_projection.layer1.norm.weight", []int64{c1}, core.RoleNorm)
	each("audio_tower.subsample_conv_projection.input_proj_linear.weight", []int64{d, c0 / 4 * c1}, core.RoleLinear)
	for i := int64(0); i < a.Depth; i++ {
		p := "audio_tower.layers." + core.Itoa(i) + "."
		for _, ff := range []string{"feed_forward1.", "feed_forward2."} {
			each(p+ff+"ffw_layer_1.linear.weight", []int64{4 * d, d}, core.RoleUp)
			each(p+ff+"ffw_layer_2.linear.weight", []int64{d, 4 * d}, core.RoleDown)
			each(p+ff+"pre_layer_norm.weight", []int64{d}, core.RoleNorm)
			each(p+ff+"post_layer_norm.weight", []int64{d}, core.RoleNorm)
		}
		each(p+"self_attn.q_proj.linear.weight", []int64{inner, d}, core.RoleQ)
		each(p+"self_attn.k_proj.linear.weight", []int64{inner, d}, core.RoleK)
		each(p+"self_attn.v_proj.linear.weight", []int64{inner, d}, core.RoleV)
		each(p+"self_attn.post.linear.weight", []int64{d, d}, core.RoleO)
		each(p+"self_attn.relative_k_proj.weight", []int64{inner, d}, core.RoleK)
		each(p+"self_attn.per_dim_scale", []int64{a.headDim()}, core.RoleNorm)
		each(p+"lconv1d.linear_start.linear.weight", []int64{2 * d, d}, core.RoleUp)
		each(p+"lconv1d.linear_end.linear.weight", []int64{d, d}, core.RoleDown)
		each(p+"lconv1d.depthwise_conv1d.weight", []int64{d, 1, a.ConvKernel}, core.RoleLinear)
		each(p+"lconv1d.pre_layer_norm.weight", []int64{d}, core.RoleNorm)
		each(p+"lconv1d.conv_norm.weight", []int64{d}, core.RoleNorm)
		for _, n := range []string{"norm_pre_attn", "norm_post_attn", "norm_out"} {
			each(p+n+".weight", []int64{d}, core.RoleNorm)
		}
	}
	each("audio_tower.output_proj.weight", []int64{a.ProjDim, d}, core.RoleLinear)
	each("audio_tower.output_proj.bias", []int64{a.ProjDim}, core.RoleLinear)
	each("embed_audio.embedding_projection.weight", []int64{a.TextDim, a.ProjDim}, core.RoleLinear)
}

// TowerParams is model.audio_tower alone.
func (a *Gemma4AudioTower) TowerParams() int64 { return a.Params() - a.ProjDim*a.TextDim }

func (a *Gemma4AudioTower) Params() int64 { return countTensors(a.weights, "") }

func (a *Gemma4AudioTower) Summary() string {
	return fmt.Sprintf("%d conformer layers of %d, %d heads, -> %d -> %d (weights only: no audio input)", a.Depth, a.Dim, a.Heads, a.ProjDim, a.TextDim)
}

func (a *Gemma4AudioTower) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, a.Dim}, sized{FieldDepth, a.Depth}, sized{FieldHeads, a.Heads},
		sized{FieldConvKernel, a.ConvKernel}, sized{FieldOutputDim, a.ProjDim}, sized{FieldTextDim, a.TextDim}); err != nil {
		return err
	}
	if a.Channels[0] < 4 || a.Channels[1] <= 0 {
		return fieldErr(path, FieldSubsampling, fmt.Sprintf(" (%d, %d) must be at least 4 and positive", a.Channels[0], a.Channels[1])).
			withHint("input_proj_linear reads the first convolution's channels / 4 x the second's features (Gemma 4's 128 and 32)")
	}
	return checkBounds(path, bounded{FieldDim, a.Dim, 1 << 20}, bounded{FieldDepth, a.Depth, 1 << 12}, bounded{FieldOutputDim, a.ProjDim, 1 << 20},
		bounded{FieldConvKernel, a.ConvKernel, 1 << 10}, bounded{FieldSubsampling, max(a.Channels[0], a.Channels[1]), 1 << 16})
}

// Lower registers the weights: no audio runs.
func (a *Gemma4AudioTower) Lower(b *core.Builder, x core.Value) core.Value {
	registerTensors(b, a.Depth*22+8, a.weights)
	return x
}

// BlockPaths are the tower's Gemma4AudioLayers (FSDP units:
// core.BlockLister).
func (v *Gemma4AudioTower) BlockPaths() []string {
	return numbered("audio_tower.layers", v.Depth)
}
