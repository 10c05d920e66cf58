package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Images are the images each sample of a vision-language model carries
// (train(images=...)): Count images of Height x Width pixels, the size the
// model's processor resizes them to. A vision tower turns each into
// patches and image tokens that join the text sequence (nn.VisionTower).
type Images struct {
	Count, Height, Width int64
}

// maxImagePixels bounds one image (a 64K x 64K picture), so that patch
// counts and their products stay far from overflow.
const maxImagePixels = 1 << 32

// Validate checks the sizes.
func (im Images) Validate() error {
	if im.Count == 0 && im.Height == 0 && im.Width == 0 {
		return nil
	}
	if im.Count <= 0 || im.Height <= 0 || im.Width <= 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("images needs a positive count, height and width (got %d, %d, %d)", im.Count, im.Height, im.Width),
			Hint: "images=(count, height, width): images per sample and their size in pixels"}
	}
	if im.Height > maxImagePixels/im.Width || im.Count > 1<<20 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("images=(%d, %d, %d) is more than memsh simulates", im.Count, im.Height, im.Width)}
	}
	return nil
}

// CrossStates are the image states a vision model (nn.MllamaVision)
// leaves for the text model's cross-attention layers, with the masks
// transformers builds once a step and every cross-attention layer saves:
// States [batch, image tokens, hidden], Mask the additive
// cross_attention_mask [batch, 1, seq, image tokens], RowMask
// full_text_row_masked_out_mask [batch, 1, seq, 1].
type CrossStates struct {
	States, Mask, RowMask Value
}

// DeepstackStates are the features a Qwen3-VL vision tower
// (nn.Qwen3VisionTower) leaves for the text model: Feats[i], [image tokens,
// hidden], is added to the hidden states at the image positions after
// decoder layer i (nn.DeepstackAdd); Mask is the placeholder mask
// [batch, seq] the adds index with. Held are features the forward keeps
// referenced until it returns besides Feats (the image and video runs'
// own, when both are joined).
type DeepstackStates struct {
	Feats []Value
	Mask  Value
	Held  []Value
}

// VisionLayer is a layer that reads the plan's images (a vision tower).
type VisionLayer interface {
	ReadsImages() bool
}

// readsImages reports a layer that reads the plan's images.
func readsImages(l Layer) bool {
	v, ok := l.(VisionLayer)
	return ok && v.ReadsImages()
}

// firstLayer is the first layer of p's model, its children included, that
// match reports; nil for none.
func (p *Plan) firstLayer(match func(Layer) bool) Layer {
	var found Layer
	for _, l := range p.Model.Layers {
		Walk(l, "", func(_ string, x Layer) {
			if found == nil && match(x) {
				found = x
			}
		})
	}
	return found
}

// validateImages checks train(images=...) against the model: images need
// a vision tower to read them.
func (p *Plan) validateImages() error {
	if err := p.Images.Validate(); err != nil {
		return err
	}
	if p.Images.Count == 0 {
		return nil
	}
	if p.firstLayer(readsImages) == nil {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("images= but model %q has no vision tower", p.Model.Name),
			Hint: "images are read by a vision-language model (hf_config of a qwen2_5_vl, qwen3_vl, qwen3_vl_moe, Qwen3.5, gemma3, gemma4, mllama, llama4, kimi_k25, mistral3, internvl or llava config, or vision_tower())"}
	}
	return nil
}
