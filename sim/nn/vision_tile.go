package nn

// SquareTile is the square input of a ViT that sees every image (or every
// tile of one) at one size: Image x Image pixels of Channels channels,
// cut into Patch x Patch patches by a convolution of stride Patch without
// padding, so a side's patch count floors (SmolVLM-2.2B: 384 // 14 = 27).
// The towers of LLaVA (CLIP, SigLIP), Gemma 3, Idefics3, InternVL and
// Llama 4 read their vision_config's image_size, patch_size and
// num_channels into it.
type SquareTile struct {
	Image    int64 // image_size: an image's (a tile's) side in pixels
	Patch    int64 // patch_size
	Channels int64 // num_channels
}

// side is the patches of a tile's side (num_patches_per_side).
func (t SquareTile) side() int64 { return t.Image / t.Patch }

// patches is a tile's patches, a class token not counted.
func (t SquareTile) patches() int64 { return t.side() * t.side() }

// patchIn is the values one patch holds: the patch convolution's input
// width.
func (t SquareTile) patchIn() int64 { return t.Channels * t.Patch * t.Patch }
