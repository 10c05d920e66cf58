package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// What the images add to the storages autograd saves in a tiny Kimi K2.5
// (sim/testdata/hf/kimi-k2.5-tiny.json: MoonViT of 2 layers 32 wide, 4
// heads, patches of 14, an 8 x 8 position grid, merge [2, 2], the
// projector 128 wide; Kimi K2's text model of 2 layers 64 wide, MLA and 4
// experts), the step with the images minus the same step with text tokens
// in their place, as tools/oracle/kimivis.py measures it (transformers
// 5.25.0 and 5.17.0, torch 2.15.0, sdpa, on the CPU; parameters and
// buffers excluded), each command under both releases:
//
//	/work/venv-t/bin/python kimivis.py ../../sim/testdata/hf/kimi-k2.5-tiny.json 1 56 56 64
//	/work/venv-t/bin/python kimivis.py ../../sim/testdata/hf/kimi-k2.5-tiny.json 2 84 112 96
//	/work/venv-t/bin/python kimivis.py ../../sim/testdata/hf/kimi-k2.5-tiny.json 1 100 150 96
//	/work/venv-t/bin/python kimivis.py ../../sim/testdata/hf/kimi-k2.5-tiny.json 1 56 56 64 bf16
//	/work/venv-t/bin/python kimivis.py ../../sim/testdata/hf/kimi-k2.5-tiny.json 2 84 112 96 bf16
//	/work/venv-t/bin/python kimivis.py ../../sim/testdata/hf/kimi-k2.5-tiny.json 2 84 112 96 ckpt
//	/work/venv-t/bin/python kimivis.py ../../sim/testdata/hf/kimi-k2.5-tiny.json 2 84 112 96 bf16 ckpt
//
// 56 x 56 pixels are 4 x 4 patches (4 image tokens); 84 x 112 are 6 x 8;
// 100 x 150 are padded to 112 x 168, 8 x 12 patches (navit_resize; the
// same 96 patches as two of 6 x 8, and the same bytes: SDPA's per-image
// outputs sum to one output). kimivis.py holds every packed tensor until
// backward: without that, a storage freed in the text model's routing
// and reused by a later saved tensor hid it from the count, by 768 or
// 1,024 bytes from run to run. One
// fp32 image of 4 x 4 patches, 107,072 bytes, counted by hand from the
// list (kimivis.py ... list): the pixel patches the Conv2d saves (16 x 3
// x 14 x 14 x 4 = 37,632); embedding_bag's int64 taps, offsets, bag sizes
// and max indices and its fp32 tap weights (3,456); the rotary cos and
// sin (1,024); per layer (27,136): norm1's input, mean, rstd and output,
// q and k after the rope, v, SDPA's output and logsumexp, the per-image
// outputs' concatenation (proj's input), the residual, norm2's
// statistics and output, fc1's and GELU's outputs; final_layernorm's
// input and statistics (2,176); the merge index (128); the mean pre_norm
// saves with its statistics (2,176), in_proj's input and output, GELU's
// output (6,144); the placeholder mask (64). In bf16 (the model built in
// bf16, bf16 pixels) all of it halves but the int64 tensors, the fp32
// rotary tables and logsumexp and the bool mask. With every layer
// checkpointed (the tower's Kimi_K25VisionEncoderLayer is a
// GradientCheckpointingLayer; use_reentrant=False) memsh counts the
// rotary cos and sin beside what autograd packs: the checkpointed layers'
// recompute keeps its arguments, position_embeddings among them, until
// their backward, where no saved-tensor hook sees them (patches x
// head_dim x 4 bytes each, fp32 in both precisions).
//
// Under 5.25.0 (the merge as 5.24.0 and later run it,
// Kimi_K25VisionModel.temporal_merge) every row is 132 bytes a patch
// more than under 5.17.0 (16 patches: 2,112; 96: 12,672), in both
// precisions, from the list: the fp32 product hidden_states.float() *
// frame_weight[:, None] that IndexAddBackward0 keeps (patches x 32 x 4)
// and frame_weight the product keeps (patches x 4); the int64
// destination index replaces the merge index, and pre_norm saves the
// pooled patches in the model's dtype as it saved the mean.
func TestKimiVisionSavesAsTransformers(t *testing.T) {
	const tables = 2 * (2 * 6 * 8) * (32 / 4) * 4 // the rotary cos and sin the recompute's arguments hold: patches x head_dim, fp32
	for _, release := range []struct {
		transformers string
		cases        []imagesSaveCase
	}{
		{"5.25.0", []imagesSaveCase{
			{core.Images{Count: 1, Height: 56, Width: 56}, 64, "fp32", false, 109_184},
			{core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", false, 654_816},
			{core.Images{Count: 1, Height: 100, Width: 150}, 96, "fp32", false, 654_816},
			{core.Images{Count: 1, Height: 56, Width: 56}, 64, "bf16", false, 57_728},
			{core.Images{Count: 2, Height: 84, Width: 112}, 96, "bf16", false, 346_080},
			{core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", true, 347_616 + tables},
			{core.Images{Count: 2, Height: 84, Width: 112}, 96, "bf16", true, 187_872 + tables},
		}},
		{"5.17.0", []imagesSaveCase{
			{core.Images{Count: 1, Height: 56, Width: 56}, 64, "fp32", false, 107_072},
			{core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", false, 642_144},
			{core.Images{Count: 1, Height: 100, Width: 150}, 96, "fp32", false, 642_144},
			{core.Images{Count: 1, Height: 56, Width: 56}, 64, "bf16", false, 55_616},
			{core.Images{Count: 2, Height: 84, Width: 112}, 96, "bf16", false, 333_408},
			{core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", true, 334_944 + tables},
			{core.Images{Count: 2, Height: 84, Width: 112}, 96, "bf16", true, 175_200 + tables},
		}},
	} {
		t.Run(release.transformers, func(t *testing.T) {
			// kimivis.py on the meta device, under both releases: 275,520
			// parameters, vision_tower 38,048 and mm_projector 24,832 of them
			checkImagesSaveCases(t, "kimi-k2.5-tiny.json", hf.Options{Attn: "sdpa", Transformers: release.transformers}, 275_520, release.cases)
		})
	}
}

// Kimi K2.5's patch embedding is a Conv2d (Kimi_K25VisionPatchEmbed.proj),
// as Pixtral's is (patch_conv), Qwen2.5-VL's and Qwen3-VL's a Conv3d, each
// lowered as its matmul: PEFT's "all-linear" adapts nn.Linear modules
// only, and bitsandbytes quantizes only them, so with images under QLoRA
// the conv has no adapter and stays in the model's dtype, while the
// towers' linears get both (core.RoleConv).
func TestPatchConvIsNoLinear(t *testing.T) {
	for _, tc := range []struct {
		config, conv, linear string
	}{
		{"kimi-k2.5-tiny.json", "model.vision_tower.patch_embed.proj", "model.vision_tower.layers.0.attn.q_proj"},
		{"kimi-k2.5-tiny.json", "model.vision_tower.patch_embed.proj", "model.mm_projector.in_proj"},
		{"qwen2.5-vl-tiny.json", "model.visual.patch_embed.proj", "model.visual.blocks.0.attn.qkv"},
		{"qwen3-vl-tiny.json", "model.visual.patch_embed.proj", "model.visual.blocks.0.mlp.linear_fc1"},
		{"mistral3-tiny.json", "model.vision_tower.patch_conv", "model.vision_tower.transformer.layers.0.attention.q_proj"},
		{"mistral3-tiny.json", "model.vision_tower.patch_conv", "model.multi_modal_projector.patch_merger.merging_layer"},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Seq = 64
		p.Images = core.Images{Count: 1, Height: 56, Width: 56}
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
		p.Quant = "nf4"
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		quant := map[string]string{}
		for _, pa := range prog.Params {
			quant[pa.Name] = pa.Quant
		}
		for _, w := range []struct {
			name  string
			held  bool
			quant string
		}{
			{tc.conv + ".weight", true, ""},
			{tc.conv + ".lora.lora_A.weight", false, ""},
			{tc.linear + ".weight", true, "nf4"},
			{tc.linear + ".lora.lora_A.weight", true, ""},
		} {
			q, ok := quant[w.name]
			if ok != w.held || q != w.quant {
				t.Errorf("%s: %s: registered %v, quantized %q; want %v, %q", tc.config, w.name, ok, q, w.held, w.quant)
			}
		}
	}
}

// Kimi K2.5's videos are refused with the reason (its chunks of 4 frames
// attended to together and pooled, which memsh does not model) and a
// hint, not the generic images-only error.
func TestKimiVideosRefused(t *testing.T) {
	p := visionPlan(t, "kimi-k2.5-tiny.json", hf.Options{Attn: "sdpa"}, 275_520, "fp32")
	p.Seq, p.Videos = 96, core.Videos{Count: 1, Frames: 8, Height: 56, Width: 56, FPS: 2}
	_, err := Evaluate(p, core.Options{})
	var ue *units.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, "is not modelled: Kimi K2.5's video processor cuts each video into chunks of 4 frames") ||
		!strings.Contains(ue.Hint, "images=(count, height, width) runs each frame as its own image") {
		t.Errorf("kimi_k25 with videos: %v, want the reasoned refusal and its hint", err)
	}
}
