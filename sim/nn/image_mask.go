package nn

import "github.com/memsh/memsh/sim/core"

// imageMasked reports whether the text attention gets a mask because the
// step has images (Attention.ImageMask): Gemma3Model.forward hands the
// processor's token_type_ids to create_masks_for_vision_model, which ORs
// a blockwise mask (each image's tokens see one another) into the causal
// one of every layer and turns off allow_is_causal_skip
// (masking_utils.create_causal_mask with block_sequence_ids,
// transformers 5.25.0): SDPA then always gets the mask, keeps it as an
// additive bias and takes the keys and values expanded to every head (no
// enable_gqa with a mask). Eager attention adds a mask anyway. Measured on
// the CPU: TestGemma3VisionSavesAsTransformers.
func (a *Attention) imageMasked(b *core.Builder) bool {
	return a.ImageMask && a.Impl == "sdpa" && b.Images.Count > 0
}
