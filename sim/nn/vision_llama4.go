package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Llama4Vision is Llama 4's vision model, its pixel-shuffle adapter and
// the multi-modal projector, as transformers 5.17 runs them
// (Llama4VisionModel and Llama4ForConditionalGeneration.forward in
// models/llama4/modeling_llama4.py), named as its module tree:
// vision_model and multi_modal_projector beside language_model.
//
//   - the processor (Llama4ImageProcessor) fits each image to a canvas of
//     tiles of Image x Image pixels, at most MaxTiles of them (its
//     max_patches, 16; get_best_fit: the smallest upscale, else the least
//     downscale), and adds a global tile (the whole image resized to one
//     tile) when the canvas has more than one (Llama4Tiles);
//   - each tile is cut into Patch x Patch patches and embedded by
//     patch_embedding (Llama4UnfoldConvolution: nn.Unfold, then a linear
//     without bias: the matmul reads a contiguous copy of the unfolded
//     pixels, which it saves); a class token is appended, the learned
//     positional_embedding_vlm (P+1 rows) added, layernorm_pre;
//   - Layers encoder layers (model.layers: LayerNorm, q/k/v/o with biases
//     and Llama 4's 2-D rotary embedding as a complex product, full
//     non-causal attention within the tile; LayerNorm, fc1-GELU-fc2 with
//     biases), layernorm_post, the class token dropped (a view);
//   - vision_adapter: pixel_shuffle (two contiguous copies) merges Shuffle
//     x Shuffle neighbouring patches into one token of Dim x Shuffle²
//     (pixel_shuffle_ratio = 1/Shuffle), then fc1 (no bias, to ProjIn),
//     GELU, fc2 (no bias, ProjOut to ProjOut), GELU;
//   - multi_modal_projector.linear_1 (vision_output_dim to the text width,
//     no bias); the image tokens replace the <|patch|> placeholders of the
//     text embeddings (masked_scatter; its backward keeps the mask).
//
// The rotary table is a module buffer (vision_model.rotary_embedding
// .freqs_ci, complex64 [P+1, 1, head_dim/2]) on the device with the
// weights; every layer's complex product saves it, nothing per step. The
// pixel values reach the model as the processor makes them, in the
// model's dtype (Llama4VisionModel does not cast them: a bf16 model needs
// bf16 pixels). The images come from train(images=(count, height,
// width)); without them the weights are registered and nothing runs.
type Llama4Vision struct {
	Dim        int64 // vision hidden_size
	Layers     int64 // num_hidden_layers
	Heads      int64 // num_attention_heads
	Inter      int64 // intermediate_size: the encoder MLP's, and the adapter's fc1 input
	SquareTile       // image_size, patch_size, num_channels
	Shuffle    int64 // 1 / pixel_shuffle_ratio
	ProjIn     int64 // projector_input_dim: the adapter's fc1 output
	ProjOut    int64 // projector_output_dim: the adapter's fc2
	OutputDim  int64 // vision_output_dim: the projector's input
	TextDim    int64 // the text model's hidden_size (the projector's output)
	MaxTiles   int64 // the processor's max_patches
	Impl       string
}

// The Fields Llama4Vision's checks name beside the shared ones.
const (
	FieldShuffle  Field = "pixel shuffle ratio"
	FieldProjIn   Field = "projector input width"
	FieldProjOut  Field = "projector output width"
	FieldMaxTiles Field = "tiles an image"
)

func (v *Llama4Vision) Kind() string              { return "llama4_vision" }
func (v *Llama4Vision) Label() string             { return "" }
func (v *Llama4Vision) DefaultName() string       { return "" } // vision_model and multi_modal_projector name themselves
func (v *Llama4Vision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *Llama4Vision) Children() []core.Layer    { return nil }
func (v *Llama4Vision) InDim() int64              { return v.TextDim }
func (v *Llama4Vision) OutDim() int64             { return v.TextDim }
func (v *Llama4Vision) ReadsImages() bool         { return true }

func (v *Llama4Vision) headDim() int64 { return v.Dim / v.Heads }

// TileTokens is the image tokens one tile adds to the text.
func (v *Llama4Vision) TileTokens() int64 { return v.patches() / (v.Shuffle * v.Shuffle) }

// tensors lists the parameters, as the lowering registers them.
func (v *Llama4Vision) tensors(fn tensorFn) {
	d := v.Dim
	fn("vision_model.patch_embedding.linear.weight", []int64{d, v.patchIn()}, core.RoleLinear)
	fn("vision_model.class_embedding", []int64{d}, core.RoleEmbed)
	fn("vision_model.positional_embedding_vlm", []int64{v.patches() + 1, d}, core.RoleEmbed)
	fn("vision_model.layernorm_pre.weight", []int64{d}, core.RoleNorm)
	fn("vision_model.layernorm_pre.bias", []int64{d}, core.RoleNorm)
	for i := int64(0); i < v.Layers; i++ {
		encoderLayerTensors(fn, "vision_model.model.layers."+core.Itoa(i)+".", llamaEncoderLayer, d, v.Inter, true)
	}
	fn("vision_model.layernorm_post.weight", []int64{d}, core.RoleNorm)
	fn("vision_model.layernorm_post.bias", []int64{d}, core.RoleNorm)
	fn("vision_model.vision_adapter.mlp.fc1.weight", []int64{v.ProjIn, v.Inter}, core.RoleLinear)
	fn("vision_model.vision_adapter.mlp.fc2.weight", []int64{v.ProjOut, v.ProjOut}, core.RoleLinear)
	fn("multi_modal_projector.linear_1.weight", []int64{v.TextDim, v.OutputDim}, core.RoleLinear)
}

// Params: the vision model and the projector.
func (v *Llama4Vision) Params() int64 { return countTensors(v.tensors, "") }

func (v *Llama4Vision) Summary() string {
	return fmt.Sprintf("%d layers of %d, %d heads, tiles of %d px, patch %d, shuffle 1/%d, -> %d", v.Layers, v.Dim, v.Heads, v.Image, v.Patch, v.Shuffle, v.TextDim)
}

func (v *Llama4Vision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldImage, v.Image}, sized{FieldPatch, v.Patch}, sized{FieldInChans, v.Channels}, sized{FieldShuffle, v.Shuffle},
		sized{FieldProjIn, v.ProjIn}, sized{FieldProjOut, v.ProjOut}, sized{FieldOutputDim, v.OutputDim}, sized{FieldTextDim, v.TextDim},
		sized{FieldMaxTiles, v.MaxTiles}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 22}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldInChans, v.Channels, 1 << 6}, bounded{FieldImage, v.Image, 1 << 14}, bounded{FieldProjIn, v.ProjIn, 1 << 20}, bounded{FieldProjOut, v.ProjOut, 1 << 20}, bounded{FieldOutputDim, v.OutputDim, 1 << 20},
		bounded{FieldTextDim, v.TextDim, 1 << 20}, bounded{FieldMaxTiles, v.MaxTiles, 1 << 8}); err != nil {
		return err
	}
	if v.Shuffle > 1<<6 {
		return fieldErr(path, FieldShuffle, fmt.Sprintf(" (1/%d) is finer than memsh simulates (1/64 at most)", v.Shuffle)).withHint(hintBounds)
	}
	if v.Dim%v.Heads != 0 || v.headDim()%4 != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d) into heads of a multiple of 4", v.Dim)).
			withHint("Llama4VisionRotaryEmbedding rotates each head as x and y halves of complex pairs")
	}
	if v.Image%v.Patch != 0 {
		return fieldErr(path, FieldPatch, fmt.Sprintf(" (%d) must divide ", v.Patch), FieldImage, fmt.Sprintf(" (%d)", v.Image)).
			withHint("the rotary table and positional_embedding_vlm have one row a patch of a tile")
	}
	if v.side()%v.Shuffle != 0 {
		return fieldErr(path, FieldShuffle, fmt.Sprintf(" (1/%d) must divide the %d patches of a tile's side", v.Shuffle, v.side())).
			withHint("pixel_shuffle views the tile's patches as a grid merged Shuffle x Shuffle")
	}
	if v.Inter != v.Dim*v.Shuffle*v.Shuffle {
		return fieldErr(path, FieldHidden, fmt.Sprintf(" (%d) must be ", v.Inter), FieldDim, fmt.Sprintf(" x %d (%d)", v.Shuffle*v.Shuffle, v.Dim*v.Shuffle*v.Shuffle)).
			withHint("Llama4VisionMLP2.fc1 reads intermediate_size features, and the pixel shuffle makes hidden_size / ratio² of them")
	}
	if v.ProjIn != v.ProjOut {
		return fieldErr(path, FieldProjIn, fmt.Sprintf(" (%d) must be ", v.ProjIn), FieldProjOut, fmt.Sprintf(" (%d)", v.ProjOut)).
			withHint("the adapter's fc2 is a square linear of projector_output_dim reading fc1's output")
	}
	if v.OutputDim != v.ProjOut {
		return fieldErr(path, FieldOutputDim, fmt.Sprintf(" (%d) must be ", v.OutputDim), FieldProjOut, fmt.Sprintf(" (%d)", v.ProjOut)).
			withHint("multi_modal_projector reads the adapter's output")
	}
	switch v.Impl {
	case "sdpa", "eager":
	case "flash":
		return fieldErr(path, "Llama 4 has no flash-attention path").withHint("use ", FieldImpl, `="sdpa"`)
	default:
		return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: sdpa, eager)", v.Impl))
	}
	return nil
}

// CheckLayout: the vision model runs on each data-parallel replica whole.
func (v *Llama4Vision) CheckLayout(path string, par core.Parallelism) error {
	return dataParallelOnly(path, "Llama 4's vision model", par, "use dp, fsdp or zero; or train the text model alone: hf_config(..., arch=\"Llama4ForCausalLM\")")
}

// Llama4Tiles is the tiles Llama4ImageProcessor makes of an image of h x
// w pixels (image_processing_llama4.py, 5.17.0): the canvases of n tiles
// of tile pixels a side for n up to maxTiles (find_supported_resolutions:
// every rows x cols = n), each scaled by min(canvas height / h, canvas
// width / w) in fp32 as torch divides; the smallest scale of at least 1,
// else the largest below 1, the smallest area among equals (get_best_fit,
// resize_to_max_canvas False); the canvas's tiles, and the global tile
// when there are several.
func Llama4Tiles(h, w, tile, maxTiles int64) int64 {
	type canvas struct {
		tiles int64
		scale float32
	}
	var all []canvas
	upscale := false
	for n := maxTiles; n >= 1; n-- {
		for r := int64(1); r <= n; r++ {
			if n%r == 0 {
				s := min(float32(r*tile)/float32(h), float32(n/r*tile)/float32(w))
				all = append(all, canvas{n, s})
				upscale = upscale || s >= 1
			}
		}
	}
	var pick float32
	first := true
	for _, c := range all {
		if (c.scale >= 1) == upscale && (first || (upscale && c.scale < pick) || (!upscale && c.scale > pick)) {
			pick, first = c.scale, false
		}
	}
	n := int64(0)
	for _, c := range all {
		if c.scale == pick && (n == 0 || c.tiles < n) {
			n = c.tiles
		}
	}
	if n > 1 {
		return n + 1
	}
	return n
}

// registerIdle registers the weights and the rotary buffer when no image
// runs.
func (v *Llama4Vision) registerIdle(b *core.Builder) {
	registerTensors(b, v.Layers*16+11, v.tensors)
	v.rotaryBuffer(b)
}

// rotaryBuffer is Llama4VisionRotaryEmbedding's freqs_ci: complex64 [P+1,
// 1, head_dim/2], 8 bytes a complex, held as fp32 pairs.
func (v *Llama4Vision) rotaryBuffer(b *core.Builder) {
	b.Buffer("vision_model.rotary_embedding.freqs_ci", []int64{v.patches() + 1, 1, v.headDim()}, units.FP32,
		"the vision rotary table (complex64 [patches+1, 1, head_dim/2], a non-persistent buffer), saved by every layer's rope")
}

// BlockPaths are the vision model's Llama4VisionEncoderLayers (FSDP units:
// core.BlockLister).
func (v *Llama4Vision) BlockPaths() []string {
	return numbered("vision_model.model.layers", v.Layers)
}
