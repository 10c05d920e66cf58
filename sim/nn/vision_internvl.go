package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
)

// InternVLVision is InternVL's vision tower (InternVLVisionModel: the
// InternViT of InternVL3 and InternVL3.5) and its multi-modal projector
// (InternVLMultiModalProjector), as transformers 5.25.0 runs them
// (models/internvl/modeling_internvl.py), named as its module tree:
// vision_tower and multi_modal_projector beside language_model.
//
//   - the processor (GotOcr2ImageProcessor with crop_to_patches, as
//     InternVLProcessor sets it) cuts each image into tiles of Image x
//     Image pixels (InternVLTiles: 1 to MaxTiles of them, plus a
//     thumbnail when there are several); every tile is one image to the
//     tower; the pixel values come in fp32 and get_image_features casts
//     them to the model's dtype (a bf16 model keeps a bf16 copy, which
//     the convolution saves);
//   - embeddings: patch_embeddings.projection, a Conv2d of Patch x Patch
//     with bias (lowered as the matmul it is), the cls_token concatenated
//     in front of each tile's patches (torch.cat, a copy), plus the
//     learned position_embeddings (one row a patch and one for the cls);
//   - Layers encoder layers: layernorm_before, attention (q_proj, k_proj,
//     v_proj with biases when AttnBias; with QKNorm, q_norm and k_norm,
//     Llama-style RMSNorms over q's and k's whole width, all heads at
//     once, before the heads are split; projection_layer with a bias, not
//     causal), times lambda_1 (a learned per-channel scale, which saves
//     the attention's output); layernorm_after, mlp (fc1, Act, fc2 with
//     biases), times lambda_2; the norms LayerNorms with biases, or
//     RMSNorms (RMS: norm_type "rms_norm");
//   - layernorm after the layers unless MeanPooling (use_mean_pooling: an
//     Identity, InternVL3's);
//   - the cls dropped (vision_feature_select_strategy "default", a view),
//     then pixel_shuffle: two permute(...).contiguous() copies that put
//     Merge x Merge neighbouring patches side by side (the first freed in
//     the forward, the second saved by the projector's layer_norm);
//   - multi_modal_projector: layer_norm over Dim x Merge², linear_1 to
//     the text width, ProjAct, linear_2 (with biases); the image tokens
//     replace the placeholders of the text embeddings (masked_scatter; its
//     backward keeps the mask).
//
// All tiles of a micro-batch run as one batch of [tiles, patches+1, Dim]
// (every tile the same size): SDPA and flash without a mask, or eager
// attention (softmax in the scores' dtype). The images come from
// train(images=(count, height, width)); without them the weights are
// registered and nothing runs.
type InternVLVision struct {
	Dim         int64 // vision hidden_size
	Layers      int64 // num_hidden_layers
	Heads       int64 // num_attention_heads
	Inter       int64 // intermediate_size
	Act         string
	SquareTile        // image_size, patch_size, num_channels
	AttnBias    bool  // attention_bias: q_proj, k_proj, v_proj biases
	QKNorm      bool  // use_qk_norm: q_norm and k_norm over Dim (InternViT-6B)
	RMS         bool  // norm_type "rms_norm" (else LayerNorms with biases)
	MeanPooling bool  // use_mean_pooling: no final layernorm
	Merge       int64 // int(1 / downsample_ratio): patches merged a side
	MaxTiles    int64 // the processor's max_patches (12)
	TextDim     int64 // the text model's hidden_size
	ProjAct     string
	Impl        string
}

func (v *InternVLVision) Kind() string              { return "internvl_vision" }
func (v *InternVLVision) Label() string             { return "" }
func (v *InternVLVision) DefaultName() string       { return "" } // vision_tower and multi_modal_projector name themselves
func (v *InternVLVision) Modules() []core.ModuleRow { return tensorModules(v.Kind(), v.tensors) }
func (v *InternVLVision) Children() []core.Layer    { return nil }
func (v *InternVLVision) InDim() int64              { return v.TextDim }
func (v *InternVLVision) OutDim() int64             { return v.TextDim }
func (v *InternVLVision) ReadsImages() bool         { return true }

func (v *InternVLVision) mergedDim() int64 { return v.Dim * v.Merge * v.Merge }

// TileTokens is the image tokens one tile adds to the text (256 for
// InternVL3's 448-pixel tiles of 14-pixel patches, merged 2 x 2).
func (v *InternVLVision) TileTokens() int64 { return v.patches() / (v.Merge * v.Merge) }

// tensors lists the parameters, as the lowering registers them.
func (v *InternVLVision) tensors(fn tensorFn) {
	d, t, m := v.Dim, v.TextDim, v.mergedDim()
	fn("vision_tower.embeddings.cls_token", []int64{1, 1, d}, core.RoleEmbed)
	fn("vision_tower.embeddings.patch_embeddings.projection.weight", []int64{d, v.patchIn()}, core.RoleConv)
	fn("vision_tower.embeddings.patch_embeddings.projection.bias", []int64{d}, core.RoleConv)
	fn("vision_tower.embeddings.position_embeddings", []int64{1, v.patches() + 1, d}, core.RoleEmbed)
	norm := func(name string, width int64, rms bool) {
		fn(name+".weight", []int64{width}, core.RoleNorm)
		if !rms {
			fn(name+".bias", []int64{width}, core.RoleNorm)
		}
	}
	linear := func(name string, out, in int64, role core.Role, bias bool) {
		fn(name+".weight", []int64{out, in}, role)
		if bias {
			fn(name+".bias", []int64{out}, role)
		}
	}
	for i := int64(0); i < v.Layers; i++ {
		p := "vision_tower.encoder.layer." + core.Itoa(i) + "."
		fn(p+"lambda_1", []int64{d}, core.RoleNorm)
		fn(p+"lambda_2", []int64{d}, core.RoleNorm)
		norm(p+"layernorm_before", d, v.RMS)
		linear(p+"attention.q_proj", d, d, core.RoleQ, v.AttnBias)
		linear(p+"attention.k_proj", d, d, core.RoleK, v.AttnBias)
		linear(p+"attention.v_proj", d, d, core.RoleV, v.AttnBias)
		if v.QKNorm {
			norm(p+"attention.q_norm", d, true)
			norm(p+"attention.k_norm", d, true)
		}
		linear(p+"attention.projection_layer", d, d, core.RoleO, true)
		norm(p+"layernorm_after", d, v.RMS)
		linear(p+"mlp.fc1", v.Inter, d, core.RoleUp, true)
		linear(p+"mlp.fc2", d, v.Inter, core.RoleDown, true)
	}
	if !v.MeanPooling {
		norm("vision_tower.layernorm", d, false)
	}
	norm("multi_modal_projector.layer_norm", m, false)
	linear("multi_modal_projector.linear_1", t, m, core.RoleLinear, true)
	linear("multi_modal_projector.linear_2", t, t, core.RoleLinear, true)
}

// Params: the vision tower and the projector.
func (v *InternVLVision) Params() int64 { return countTensors(v.tensors, "") }

// TowerParams is the vision tower's share of Params (the rest is
// multi_modal_projector's).
func (v *InternVLVision) TowerParams() int64 { return countTensors(v.tensors, "vision_tower.") }

// tensorCount is the parameters' tensors.
func (v *InternVLVision) tensorCount() int64 {
	var n int64
	v.tensors(func(string, []int64, core.Role) { n++ })
	return n
}

func (v *InternVLVision) Summary() string {
	return fmt.Sprintf("%d layers of %d, %d heads, tiles of %d px (up to %d), patch %d, merge %d, -> %d", v.Layers, v.Dim, v.Heads, v.Image, v.MaxTiles, v.Patch, v.Merge, v.TextDim)
}

func (v *InternVLVision) Validate(path string) error {
	if err := checkPositive(path, sized{FieldDim, v.Dim}, sized{FieldDepth, v.Layers}, sized{FieldHeads, v.Heads}, sized{FieldHidden, v.Inter},
		sized{FieldImage, v.Image}, sized{FieldPatch, v.Patch}, sized{FieldInChans, v.Channels}, sized{FieldShuffle, v.Merge},
		sized{FieldMaxTiles, v.MaxTiles}, sized{FieldTextDim, v.TextDim}); err != nil {
		return err
	}
	if err := checkBounds(path, bounded{FieldDim, v.Dim, 1 << 20}, bounded{FieldHidden, v.Inter, 1 << 22}, bounded{FieldDepth, v.Layers, 1 << 12},
		bounded{FieldImage, v.Image, 1 << 14}, bounded{FieldPatch, v.Patch, 1 << 10}, bounded{FieldInChans, v.Channels, 1 << 6},
		bounded{FieldShuffle, v.Merge, 1 << 6}, bounded{FieldMaxTiles, v.MaxTiles, 1 << 8}, bounded{FieldTextDim, v.TextDim, 1 << 20}); err != nil {
		return err
	}
	if v.Dim%v.Heads != 0 {
		return fieldErr(path, FieldHeads, fmt.Sprintf(" (%d) must divide ", v.Heads), FieldDim, fmt.Sprintf(" (%d)", v.Dim))
	}
	if v.Image%v.Patch != 0 {
		return fieldErr(path, FieldPatch, fmt.Sprintf(" (%d) must divide ", v.Patch), FieldImage, fmt.Sprintf(" (%d)", v.Image)).
			withHint("position_embeddings has one row a patch of a tile")
	}
	if v.side()%v.Merge != 0 {
		return fieldErr(path, FieldShuffle, fmt.Sprintf(" (1/%d) must divide the %d patches of a tile's side", v.Merge, v.side())).
			withHint("pixel_shuffle views each side's patches in groups of int(1 / downsample_ratio)")
	}
	switch v.Impl {
	case "flash", "sdpa", "eager":
		return nil
	}
	return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: flash, sdpa, eager)", v.Impl))
}

// CheckLayout: the vision tower runs on each data-parallel replica whole.
func (v *InternVLVision) CheckLayout(path string, par core.Parallelism) error {
	return dataParallelOnly(path, "InternVL's vision tower", par, "use dp, fsdp or zero; or train the text model alone from its text_config")
}

// InternVLTiles is the tiles GotOcr2ImageProcessor.crop_image_to_patches
// makes of an image of h x w pixels (image_processing_got_ocr2.py,
// 5.25.0, min_patches 1): of the grids of cols x rows tiles with at most
// maxTiles tiles (get_all_supported_aspect_ratios, by tile count), the one
// whose cols / rows is nearest w / h, a later one of the same distance
// when the image's area is over half the grid's (get_optimal_tiled_canvas);
// its tiles, and the thumbnail when there are several.
func InternVLTiles(h, w, tile, maxTiles int64) int64 {
	type grid struct{ cols, rows int64 }
	var grids []grid
	for n := int64(1); n <= maxTiles; n++ { // sorted by tiles, stable: by cols, then rows
		for c := int64(1); c <= n; c++ {
			if n%c == 0 {
				grids = append(grids, grid{c, n / c})
			}
		}
	}
	aspect, area := float64(w)/float64(h), float64(w*h)
	best, bestDiff := grid{1, 1}, -1.0
	for _, g := range grids {
		diff := aspect - float64(g.cols)/float64(g.rows)
		if diff < 0 {
			diff = -diff
		}
		switch {
		case bestDiff < 0 || diff < bestDiff:
			best, bestDiff = g, diff
		case diff == bestDiff && area > 0.5*float64(tile*tile*g.cols*g.rows):
			best = g
		}
	}
	if n := best.cols * best.rows; n > 1 {
		return n + 1
	}
	return 1
}

// Tiles is InternVLTiles at the tower's sizes.
func (v *InternVLVision) Tiles(h, w int64) int64 { return InternVLTiles(h, w, v.Image, v.MaxTiles) }

// ImageTokens is the placeholders (<IMG_CONTEXT>) one image of h x w
// pixels has in the text: TileTokens a tile.
func (v *InternVLVision) ImageTokens(h, w int64) int64 { return v.Tiles(h, w) * v.TileTokens() }

// TextTokens is the tokens one image adds to the text: its placeholders
// between <img> and </img> (InternVLProcessor._insert_media_placeholders).
func (v *InternVLVision) TextTokens(h, w int64) int64 { return v.ImageTokens(h, w) + 2 }

// registerIdle registers the weights when no image runs.
func (v *InternVLVision) registerIdle(b *core.Builder) {
	registerTensors(b, v.tensorCount(), v.tensors)
}

// BlockPaths are the tower's InternVLVisionLayers (FSDP units:
// core.BlockLister).
func (v *InternVLVision) BlockPaths() []string {
	return numbered("vision_tower.encoder.layer", v.Layers)
}
