package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
)

// Gemma4VisionTower is Gemma 4's vision tower and its multimodal embedder
// as transformers 5.17 runs them (models/gemma4/modeling_gemma4.py:
// Gemma4VisionModel, Gemma4MultimodalEmbedder, Gemma4Model.
// get_image_features), named as its module tree (model.vision_tower,
// model.embed_vision):
//
//   - the processor (Gemma4ImageProcessor) resizes each image, keeping its
//     aspect ratio, to the largest size of at most MaxSoftTokens x Pool²
//     patches whose sides are multiples of Pool x Patch pixels (small images
//     are enlarged), cuts it into Patch x Patch x 3 patches and pads them to
//     MaxSoftTokens x Pool² patches with positions -1: every image runs that
//     many patches through the tower, whatever its size;
//   - patch_embedder: 2 * (pixels - 0.5) (a new fp32 tensor), input_proj (no
//     bias), plus the x and y rows of position_embedding_table ([2,
//     Positions, hidden]) looked up by each patch's clamped (x, y) position,
//     zeroed on padding (torch.where);
//   - encoder.layers: Gemma 4's sandwich blocks (Gemma4VisionEncoderLayer:
//     input_layernorm, self_attn, post_attention_layernorm, residual;
//     pre_feedforward_layernorm, a gated MLP, post_feedforward_layernorm,
//     residual), all Gemma4RMSNorm. The attention has q_norm and k_norm over
//     each head, a weightless v_norm, 2-D rotary embeddings (the head split
//     in an x half and a y half, cos and sin of [images, patches, head_dim]
//     in the hidden states' dtype, made once a step and saved by every
//     layer's rope), scaling 1, and a padding mask: bidirectional
//     attention over each image's padded patches (SDPA given the mask
//     saves it as its additive bias, [images, 1, patches, patches]; with no
//     padding there is no mask). With use_clipped_linears (E2B, E4B) every
//     projection is a Gemma4ClippableLinear: torch.clamp of its input and
//     of its output against buffers, each clamp saving its input;
//   - pooler: padding zeroed (masked_fill), Pool x Pool neighbouring patches
//     averaged by a one-hot fp32 matrix [images, patches, MaxSoftTokens]
//     (the bmm saves it), scaled by sqrt(hidden) in fp32, the padding
//     tokens dropped (a boolean index saving its mask), with standardize
//     (26B A4B, 31B) (x - std_bias) * std_scale in fp32, cast back;
//   - embed_vision: a weightless Gemma4RMSNorm and embedding_projection (no
//     bias) to the language model's width.
//
// The image tokens replace the image placeholders of the text embeddings
// (masked_scatter). The images come from train(images=(count, height,
// width)), the size given to the processor; without them the weights are
// registered and nothing runs. Videos and flash-attn are not modelled
// (Gemma 4's text model has no flash-attn kernel for its 512-wide heads).
type Gemma4VisionTower struct {
	Dim, Depth, Heads, KVHeads, HeadDim int64
	Inter                               int64 // the MLP's intermediate size
	Act                                 string
	Patch                               int64 // patch_size
	Pool                                int64 // pooling_kernel_size
	Positions                           int64 // position_embedding_size
	MaxSoftTokens                       int64 // the processor's max_soft_tokens (vision_soft_tokens_per_image)
	TextDim                             int64 // the language model's hidden_size
	Clip                                bool  // use_clipped_linears
	Standardize                         bool
	Impl                                string
}

func (v *Gemma4VisionTower) Kind() string           { return "gemma4_vision_tower" }
func (v *Gemma4VisionTower) Label() string          { return "" }
func (v *Gemma4VisionTower) Children() []core.Layer { return nil }
func (v *Gemma4VisionTower) InDim() int64           { return v.TextDim }
func (v *Gemma4VisionTower) OutDim() int64          { return v.TextDim }
func (v *Gemma4VisionTower) ReadsImages() bool      { return true }

func (v *Gemma4VisionTower) patchIn() int64 { return 3 * v.Patch * v.Patch }

// MaxPatches is the patches every image runs through the tower: the
// processor pads each to max_soft_tokens x pooling_kernel_size².
func (v *Gemma4VisionTower) MaxPatches() int64 { return v.MaxSoftTokens * v.Pool * v.Pool }

// layerParams is one encoder layer: q, k, v, o; q_norm and k_norm; four
// norms; gate, up and down.
func (v *Gemma4VisionTower) layerParams() int64 {
	d, hd := v.Dim, v.HeadDim
	return 2*d*v.Heads*hd + 2*d*v.KVHeads*hd + 2*hd + 4*d + 3*d*v.Inter
}

// TowerParams is model.vision_tower: input_proj, the position table, the
// layers (the clip bounds and std_bias, std_scale are buffers).
func (v *Gemma4VisionTower) TowerParams() int64 {
	return v.Dim*v.patchIn() + 2*v.Positions*v.Dim + v.Depth*v.layerParams()
}

// Params: the tower and embed_vision's projection.
func (v *Gemma4VisionTower) Params() int64 { return v.TowerParams() + v.Dim*v.TextDim }

// Modules are describe()'s rows (core.ModuleLister): vision_tower and
// embed_vision, beside language_model in Gemma4Model.
func (v *Gemma4VisionTower) Modules() []core.ModuleRow {
	return []core.ModuleRow{
		{Path: "vision_tower", Kind: v.Kind(), Summary: v.Summary(), Params: v.TowerParams()},
		{Path: "embed_vision", Kind: v.Kind(), Summary: fmt.Sprintf("%d -> %d", v.Dim, v.TextDim), Params: v.Dim * v.TextDim},
	}
}

func (v *Gemma4VisionTower) Summary() string {
	return fmt.Sprintf("%d layers of %d, %d heads of %d, patch %d, pool %d, %d soft tokens an image, -> %d", v.Depth, v.Dim, v.Heads, v.HeadDim,
		v.Patch, v.Pool, v.MaxSoftTokens, v.TextDim)
}

func (v *Gemma4VisionTower) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Depth}, sized{FieldHeads, v.Heads}, sized{FieldKVHeads, v.KVHeads},
		sized{FieldHeadDim, v.HeadDim}, sized{FieldHidden, v.Inter}, sized{FieldPatch, v.Patch}, sized{FieldMerge, v.Pool},
		sized{FieldPositions, v.Positions}, sized{FieldSoftTokens, v.MaxSoftTokens}, sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldDepth, v.Depth, 1 << 12}, bounded{FieldHidden, v.Inter, 1 << 20},
		bounded{FieldPatch, v.Patch, 1 << 10}, bounded{FieldMerge, v.Pool, 1 << 6}, bounded{FieldPositions, v.Positions, 1 << 24},
		bounded{FieldSoftTokens, v.MaxSoftTokens, 1 << 20}); err != nil {
		return err
	}
	if v.Heads > 1<<20 || v.HeadDim > 1<<20 || v.Heads*v.HeadDim > 1<<20 {
		return fieldErr(path, FieldHeads, " x ", FieldHeadDim, fmt.Sprintf(" (%d x %d) is more than memsh simulates (at most %d)", v.Heads, v.HeadDim, 1<<20)).
			withHint(hintBounds)
	}
	if v.Heads%v.KVHeads != 0 {
		return fieldErr(path, FieldKVHeads, fmt.Sprintf(" (%d) must divide ", v.KVHeads), FieldHeads, fmt.Sprintf(" (%d)", v.Heads)).
			withHint("Gemma4VisionAttention repeats each key/value head for a group of query heads")
	}
	if v.HeadDim%4 != 0 {
		return fieldErr(path, FieldHeadDim, fmt.Sprintf(" (%d) must be a multiple of 4: the 2-D rotary embedding rotates an x half and a y half", v.HeadDim))
	}
	if v.Pool < 2 {
		return fieldErr(path, FieldMerge, fmt.Sprintf(" %d is not modelled", v.Pool)).
			withHint("Gemma4VisionPooler averages pooling_kernel_size² patches a soft token; the released models pool 3 x 3")
	}
	switch v.Impl {
	case "sdpa", "eager":
	case "flash":
		return fieldErr(path, "flash-attn is not modelled for Gemma 4's vision tower").
			withHint("Gemma 4's text model has no flash-attn kernel for its 512-wide heads; use ", FieldImpl, `="sdpa" or "eager"`)
	default:
		return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: sdpa, eager)", v.Impl))
	}
	return nil
}

// Resized is the size Gemma4ImageProcessor resizes an image of h x w
// pixels to (get_aspect_ratio_preserving_size): scaled by
// sqrt(max_patches x patch² / (h x w)), each side rounded down to a
// multiple of pool x patch; a side that rounds to 0 becomes one multiple,
// the other floor(its ratio) multiples (at most max_patches / pool²). ok
// is false where the processor raises (both sides 0, or more patches than
// allowed).
func (v *Gemma4VisionTower) Resized(h, w int64) (th, tw int64, ok bool) {
	maxPatches := v.MaxPatches()
	side := v.Pool * v.Patch
	targetPx := float64(maxPatches) * float64(v.Patch*v.Patch)
	factor := math.Sqrt(targetPx / (float64(h) * float64(w)))
	th = int64(math.Floor(factor*float64(h)/float64(side))) * side
	tw = int64(math.Floor(factor*float64(w)/float64(side))) * side
	maxSide := (maxPatches / (v.Pool * v.Pool)) * side
	switch {
	case th == 0 && tw == 0:
		return 0, 0, false
	case th == 0:
		th, tw = side, min(int64(math.Floor(float64(w)/float64(h)))*side, maxSide)
	case tw == 0:
		tw, th = side, min(int64(math.Floor(float64(h)/float64(w)))*side, maxSide)
	}
	if float64(th)*float64(tw) > targetPx {
		return th, tw, false
	}
	return th, tw, true
}

// ImageTokens is the soft tokens one image of h x w pixels adds to a
// sample: its patches over pool² (0 where the processor refuses it).
func (v *Gemma4VisionTower) ImageTokens(h, w int64) int64 {
	th, tw, ok := v.Resized(h, w)
	if !ok {
		return 0
	}
	return (th / v.Patch) * (tw / v.Patch) / (v.Pool * v.Pool)
}

// registerIdle registers the weights when no image runs.
func (v *Gemma4VisionTower) registerIdle(b *core.Builder) {
	d := v.Dim
	func() {
		defer b.Scope("vision_tower")()
		idleParam(b, "patch_embedder.input_proj.weight", []int64{d, v.patchIn()}, core.RoleLinear)
		idleParam(b, "patch_embedder.position_embedding_table", []int64{2, v.Positions, d}, core.RoleEmbed)
		b.ReserveParams(v.Depth * 13)
		for i := int64(0); i < v.Depth; i++ {
			done := b.Scope("encoder.layers." + core.Itoa(i))
			for _, n := range []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"} {
				idleParam(b, n+".weight", []int64{d}, core.RoleNorm)
			}
			idleParam(b, "self_attn.q_norm.weight", []int64{v.HeadDim}, core.RoleNorm)
			idleParam(b, "self_attn.k_norm.weight", []int64{v.HeadDim}, core.RoleNorm)
			for _, p := range []struct {
				name    string
				out, in int64
				role    core.Role
			}{
				{"self_attn.q_proj", v.Heads * v.HeadDim, d, core.RoleQ}, {"self_attn.k_proj", v.KVHeads * v.HeadDim, d, core.RoleK},
				{"self_attn.v_proj", v.KVHeads * v.HeadDim, d, core.RoleV}, {"self_attn.o_proj", d, v.Heads * v.HeadDim, core.RoleO},
				{"mlp.gate_proj", v.Inter, d, core.RoleGate}, {"mlp.up_proj", v.Inter, d, core.RoleUp}, {"mlp.down_proj", d, v.Inter, core.RoleDown},
			} {
				idleParam(b, p.name+".linear.weight", []int64{p.out, p.in}, p.role)
			}
			done()
		}
	}()
	defer b.Scope("embed_vision")()
	idleParam(b, "embedding_projection.weight", []int64{v.TextDim, d}, core.RoleLinear)
}

// BlockPaths are the tower's Gemma4VisionPatchEmbedder and
// Gemma4VisionEncoderLayers (FSDP units: core.BlockLister).
func (v *Gemma4VisionTower) BlockPaths() []string {
	return append([]string{"vision_tower.patch_embedder"}, numbered("vision_tower.encoder.layers", v.Depth)...)
}
