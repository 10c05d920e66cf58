package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// What the images add to the storages autograd saves in a tiny Gemma 4
// with its vision tower (sim/testdata/hf/gemma4-vl-tiny.json: a 2-layer
// tower 32 wide, 2 heads of 16, patches of 4 pixels, pooling 2 x 2, 16
// soft tokens an image (64 patches, padded), clipped linears as E2B and
// E4B have them; gemma4-vl-std-tiny.json: the same without clipping and
// with standardize, as 26B A4B and 31B; both before gemma4-tiny.json's
// 4-layer text model 128 wide; gemma4-vl-bidir-tiny.json: the standardized
// one with use_bidirectional_attention "vision" as 26B A4B and 31B), trained
// on 64 tokens with the cpu runtime: the step with the
// images minus the same step with text tokens in their place, as
// tools/oracle/gemma4vl.py measures it (transformers 5.17.0, torch 2.15.0,
// on the CPU; parameters and buffers excluded: the clamps save their
// clip bounds, the buffers themselves):
//
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-tiny.json 2 64 96 64 [bf16] [eager]
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-tiny.json 1 32 32 64 [eager]
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-tiny.json 3 40 80 64
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-std-tiny.json 2 64 96 64 [bf16]
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-std-tiny.json 1 32 32 64
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-std-tiny.json 1 200 50 64
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-std-tiny.json 2 64 96 64 eager
//	/work/venv-t/bin/python gemma4vl.py ../../sim/testdata/hf/gemma4-vl-bidir-tiny.json 2 64 96 64 [bf16] [eager]
//
// The processor resizes 64 x 96 pixels to 24 x 32 (48 patches, 12 soft
// tokens, padded to 64 patches), 40 x 80 to 16 x 40 (40 patches, 10
// tokens), 200 x 50 to 64 x 16; 32 x 32 fills the 64 patches (no padding:
// SDPA gets no mask). The figures are: the scaled pixel patches
// input_proj saves, the clamped (x, y) positions both table lookups save,
// the padding mask (torch.where, masked_fill), per layer the Gemma 4
// RMSNorms' fp32 inputs, statistics and normalised rows, the clamps'
// inputs (clipped), q and k after their 2-D rope, v after v_norm, the
// kernel's output and logsumexp and, with padding, the additive mask SDPA
// converts the boolean one into (one per layer; eager saves its fp32
// probabilities instead), the MLP's gate, up, GELU and product; the rope
// tables once; the pooler's one-hot weights [images, soft tokens,
// patches] in fp32 and the kept-token mask; embed_vision's norm; the
// placeholder mask. In bf16 (the model cast as a whole, precision="bf16")
// the pixel patches are fp32 and input_proj saves their bf16 copy, the
// pooler and standardize run in fp32 (std_scale.float() a new fp32 copy,
// saved). With use_bidirectional_attention "vision" the text model's two
// sliding layers get a mask under SDPA: its additive bias, and k and v
// expanded to the 4 heads (repeat_kv) in place of enable_gqa's 2, kept;
// eager keeps the same either way.
func TestGemma4VisionSavesAsTransformers(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		config    string
		params    int64
		im        core.Images
		want      int64
		precision string
		attn      string
	}{
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_587_616, "", ""},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 1, Height: 32, Width: 32}, 762_128, "", ""},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 3, Height: 40, Width: 80}, 2_379_808, "", ""},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_026_208, "bf16", ""},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_651_104, "", "eager"},
		{"gemma4-vl-tiny.json", 735_552, core.Images{Count: 1, Height: 32, Width: 32}, 826_640, "", "eager"},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_030_560, "", ""},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 1, Height: 32, Width: 32}, 483_600, "", ""},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 747_808, "bf16", ""},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 1, Height: 200, Width: 50}, 483_600, "", ""},
		{"gemma4-vl-std-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_094_048, "", "eager"},
		{"gemma4-vl-bidir-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_128_864, "", ""},
		{"gemma4-vl-bidir-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 796_960, "bf16", ""},
		{"gemma4-vl-bidir-tiny.json", 735_552, core.Images{Count: 2, Height: 64, Width: 96}, 1_094_048, "", "eager"},
	} {
		if tc.attn == "" {
			tc.attn = "sdpa"
		}
		if tc.precision == "" {
			tc.precision = "fp32"
		}
		p := visionPlan(t, tc.config, hf.Options{Attn: tc.attn, Transformers: "5.17.0"}, tc.params, tc.precision)
		p.Runtime = cpu
		checkImagesSave(t, tc.config+" "+tc.precision+" "+tc.attn, p, tc.im, tc.want)
	}
}

// Gemma4ForConditionalGeneration's parameter counts as transformers 5.17.0
// counts them (tools/oracle/gemma4vl.py CONFIG --params: the model on the
// meta device, with its vision and audio towers' shares), for the text
// configs of TestGemma4Params with the towers' configs as public loaders'
// tests quote the hub's config.json files (the hub is not reachable from
// here): 26B A4B and 31B a 27-layer tower 1152 wide (16 heads of 72,
// intermediate 4304, standardize), E2B and E4B a 16-layer tower 768 wide
// (12 heads of 64, intermediate 3072, clipped linears) and a 12-layer
// conformer 1024 wide (8 heads, output 1536); every config 280 soft tokens
// an image, patches of 16, pooling 3 x 3, a 10,240-position table. The
// model cards' totals: 31B "30.7B" for the text model with a vision
// encoder of "~550M" apart (here 569.5M with embed_vision); E2B "5.1B with
// embeddings" and E4B "8B" (here 5.10B and 7.94B, the audio tower 304.8M
// and the vision tower 167.4M in both); 26B A4B "25.2B" for its text model
// (here 25.81B with the towers). gemma4-av-tiny.json is the tiny one with
// a 2-layer audio tower 32 wide (channels 8 and 4, kernel 3, output 48).
func TestGemma4ConditionalParams(t *testing.T) {
	for _, tc := range []struct {
		file                 string
		total, vision, audio int64
	}{
		{"gemma-4-31b.json", 31_273_086_512, 569_548_080 + 6_193_152, 0},
		{"gemma-4-26b-a4b.json", 25_805_933_872, 569_548_080 + 3_244_032, 0},
		{"gemma-4-e2b.json", 5_104_297_504, 167_364_608 + 1_179_648, 304_824_608 + 2_359_296},
		{"gemma-4-e4b.json", 7_941_100_832, 167_364_608 + 1_966_080, 304_824_608 + 3_932_160},
		{"gemma4-vl-tiny.json", 735_552, 24_384 + 4_096, 0},
		{"gemma4-av-tiny.json", 793_844, 24_384 + 4_096, 52_148 + 6_144},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		var vision, audio int64
		for _, l := range m.Layers {
			core.Walk(l, "", func(_ string, x core.Layer) {
				switch x := x.(type) {
				case *nn.Gemma4VisionTower:
					vision = x.Params()
				case *nn.Gemma4AudioTower:
					audio = x.Params()
				}
			})
		}
		if got := m.Params(); got != tc.total || vision != tc.vision || audio != tc.audio {
			t.Errorf("%s: %d parameters (vision %d, audio %d), want %d (%d, %d)", tc.file, got, vision, audio, tc.total, tc.vision, tc.audio)
		}
	}
}

// The towers' parameters are named as transformers names them: the tiny
// audio-and-vision model's program holds transformers' 133
// named_parameters() (the same script's model, its names compared in
// full by hand) and the tied lm_head; a few of them by name and shape.
func TestGemma4TowerNames(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "gemma4-av-tiny.json"), hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int64{
		"model.vision_tower.patch_embedder.position_embedding_table":           {2, 32, 32},
		"model.vision_tower.encoder.layers.1.mlp.down_proj.linear.weight":      {32, 64},
		"model.vision_tower.encoder.layers.0.self_attn.k_norm.weight":          {16},
		"model.embed_vision.embedding_projection.weight":                       {128, 32},
		"model.audio_tower.subsample_conv_projection.input_proj_linear.weight": {32, 8},
		"model.audio_tower.layers.1.self_attn.per_dim_scale":                   {8},
		"model.audio_tower.layers.0.lconv1d.depthwise_conv1d.weight":           {32, 1, 3},
		"model.embed_audio.embedding_projection.weight":                        {128, 48},
		"model.language_model.layers.3.self_attn.q_proj.weight":                {256, 128},
	}
	for _, im := range []core.Images{{}, {Count: 1, Height: 32, Width: 32}} {
		p := tinyPlan(t, m)
		p.Images = im
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		if len(prog.Params) != 134 {
			t.Errorf("images %v: %d parameter tensors, want 134", im, len(prog.Params))
		}
		seen := 0
		for _, q := range prog.Params {
			if shape, ok := want[q.Name]; ok {
				seen++
				if !equalShape(q.Shape, shape) {
					t.Errorf("%s: shape %v, want %v", q.Name, q.Shape, shape)
				}
			}
		}
		if seen != len(want) {
			t.Errorf("images %v: found %d of the %d named parameters", im, seen, len(want))
		}
	}
}

// Gemma 4's sliding layers under SDPA once the sequence reaches their
// window (masking_utils _ignore_causal_mask_sdpa: kv_length >= window):
// transformers hands SDPA the sliding mask, which it keeps as an additive
// bias, and expands k and v to every head (no enable_gqa with a mask).
// gemma4-tiny-w16.json is gemma4-tiny.json with a window of 16: in bf16
// its two sliding layers keep 49,152 bytes more than with the window of
// 512 at 64 tokens (2 x (a [1, 1, 64, 64] bias, and k and v of 4 heads
// for 2)), 9,216 at 16 (the window reached: the mask is there), none at
// 15, as tools/oracle/gemma4_saved.py measures them (transformers 5.17.0
// at 64 tokens, 5.25.0 at all three, the same; torch 2.15.0, CPU):
//
//	python tools/oracle/gemma4_saved.py sim/testdata/hf/gemma4-tiny.json sdpa SEQ 4      # 64: 2,897,430; 16: 732,054; 15: 686,942
//	python tools/oracle/gemma4_saved.py sim/testdata/hf/gemma4-tiny-w16.json sdpa SEQ 4  # 64: 2,946,582; 16: 741,270; 15: 686,942
//
// memsh dropped the window at 16 (window == seq) until session 28.
func TestGemma4SlidingMaskSDPA(t *testing.T) {
	saved := func(file string, seq int64) int64 {
		return cpuSaved(t, file, hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 1, seq)
	}
	for seq, more := range map[int64]int64{64: 49_152, 16: 9_216, 15: 0} {
		if got := saved("gemma4-tiny-w16.json", seq) - saved("gemma4-tiny.json", seq); got != more {
			t.Errorf("a window of 16 at %d tokens keeps %d bytes more than one of 512, transformers %d", seq, got, more)
		}
	}
}
