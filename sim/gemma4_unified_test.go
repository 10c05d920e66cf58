package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// Gemma 4 unified's text model (Gemma4UnifiedForCausalLM, transformers
// 5.25.0, meta device): gemma4-unified-text-tiny.json (128 wide, layers
// sliding, full, sliding, full; 4 heads, 2 kv heads of 32 on the sliding
// layers, 1 of 64 with k = v on the full ones, MLP 256, vocab 512, tied)
// builds 707,072 parameters, gemma4-tiny.json's count: the decoder
// layer is Gemma 4's without per-layer embeddings and without the MoE
// block, whatever hidden_size_per_layer_input or enable_moe_block say
// (Gemma4UnifiedTextConfig drops both; the same file with
// hidden_size_per_layer_input 256, or enable_moe_block true and
// num_experts 4, builds 707,072 too).
func TestGemma4UnifiedParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"gemma4-unified-text-tiny.json": 707_072,
	})
}

// What Gemma 4 unified's text layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast): 2 samples
// of 32 tokens, a window of 16 (the sliding layers get their mask),
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/gemma4-unified-text-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// (the last layer is forced to full attention: 1 layer is F, 2 are S F,
// 3 are S F F). The harness counts the buffers autograd saves as well:
// each layer's layer_scalar, which the in-place product saves, and the
// embedding's embed_scale (an element each, 4 bytes in fp32 and 2 in
// bf16), the buffers themselves, no memory of the step's: memsh's figure
// is the harness's less them. The rest is Gemma 4's text layer as memsh
// lowers it (nn.Gemma4Attention, nn.Gemma4Norm), to the byte.
func TestGemma4UnifiedSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		saved           [3]int64
	}{
		{"fp32", "sdpa", [3]int64{1_302_028, 2_161_168, 3_084_820}},
		{"fp32", "eager", [3]int64{1_432_076, 2_314_768, 3_368_468}},
		{"bf16", "sdpa", [3]int64{985_608, 1_609_482, 2_306_316}},
		{"bf16", "eager", [3]int64{1_082_888, 1_750_794, 2_544_908}},
	} {
		elem := int64(4)
		if tc.precision == "bf16" {
			elem = 2
		}
		for i, measured := range tc.saved {
			want := measured - int64(i+2)*elem // layer_scalar a layer, embed_scale
			if got := hfSaved(t, "gemma4-unified-text-tiny.json", i+1, tc.precision, hf.Options{Attn: tc.attn}, false); got != want {
				t.Errorf("%s %s, %d layers: %d saved, want %d (%+d)", tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}

// Gemma4UnifiedForConditionalGeneration's parameters (tools/oracle/
// gemma4uvl.py CONFIG --params, transformers 5.25.0, meta device):
// gemma4-unified-tiny.json (gemma4-unified-text-tiny.json as text_config;
// patches of 4 merged 2 x 2, mm_embed_dim 48, a 32-row position table,
// audio_embed_dim 40) builds 731,248: the text model's 707,072,
// embed_vision's 19,056 (two LayerNorms over 192 patch values and two
// over 48, patch_dense 192 -> 48 with bias, the table 32 x 2 x 48,
// embedding_projection 48 -> 128) and embed_audio's 5,120 (40 -> 128).
func TestGemma4UnifiedConditionalParams(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "gemma4-unified-tiny.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	vision, audio := layerOf[*nn.Gemma4UnifiedVision](m), layerOf[*nn.Gemma4UnifiedAudio](m)
	if vision == nil || audio == nil {
		t.Fatalf("no embed_vision (%v) or embed_audio (%v)", vision, audio)
	}
	if got, v, a := m.Params(), vision.Params(), audio.Params(); got != 731_248 || v != 19_056 || a != 5_120 {
		t.Errorf("%d parameters (embed_vision %d, embed_audio %d), want 731,248 (19,056, 5,120)", got, v, a)
	}
}

// What the images add to the storages autograd saves in
// gemma4-unified-tiny.json trained on 64 tokens (one sample, the cpu
// runtime), against transformers 5.25.0 on PyTorch 2.15.0 (the CPU):
//
//	cd tools/oracle; /work/venv-t/bin/python gemma4uvl.py ../../sim/testdata/hf/gemma4-unified-tiny.json COUNT HEIGHT WIDTH 64 [bf16] [eager]
//
// the step with the images minus the same step with text tokens in their
// place. 64 x 96 pixels resize to 24 x 32 (12 merged patches of 16 padded
// to 16), 32 x 32 to 32 x 32 (16, no padding), 40 x 80 to 16 x 40 (10).
// Saved: the pixel patches (patch_ln1's input: fp32 as they come, or
// their bf16 copy), each LayerNorm's mean and rstd and patch_dense's,
// patch_ln2's and pos_norm's inputs, the index's clamped positions and
// axis, the validity the product saves, the weightless RMSNorm's rows and
// statistics, embedding_projection's input, the padding mask the boolean
// index saves and the placeholder mask of masked_scatter; with the
// model's default use_bidirectional_attention "vision" every layer gets a
// mask with or without images (nn.Gemma4Attention.MaskAlways), so the
// text layers keep the same either way. Without images the step saves
// 4,009,484 bytes in fp32 under SDPA, 4,201,996 under eager, 2,962,956
// and 3,319,308 in bf16 (the harness leaves parameters and buffers out),
// memsh's figures to the byte.
func TestGemma4UnifiedImagesSaveAsTransformers(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		im              core.Images
		precision, attn string
		want, without   int64
	}{
		{core.Images{Count: 2, Height: 64, Width: 96}, "fp32", "sdpa", 75_632, 4_009_484},
		{core.Images{Count: 1, Height: 32, Width: 32}, "fp32", "sdpa", 37_856, 4_009_484},
		{core.Images{Count: 3, Height: 40, Width: 80}, "fp32", "sdpa", 113_408, 4_009_484},
		{core.Images{Count: 2, Height: 64, Width: 96}, "fp32", "eager", 75_632, 4_201_996},
		{core.Images{Count: 2, Height: 64, Width: 96}, "bf16", "sdpa", 41_328, 2_962_956},
		{core.Images{Count: 2, Height: 64, Width: 96}, "bf16", "eager", 41_328, 3_319_308},
	} {
		p := visionPlan(t, "gemma4-unified-tiny.json", hf.Options{Attn: tc.attn}, 731_248, tc.precision)
		p.Runtime = cpu
		if got := evalPlan(t, p).SavedActivations; got != tc.without {
			t.Errorf("%s %s without images: %d saved, transformers %d (%+d)", tc.precision, tc.attn, got, tc.without, got-tc.without)
		}
		checkImagesSave(t, tc.precision+" "+tc.attn, p, tc.im, tc.want)
	}
}

// gemma4-unified-defaults.json is the config classes' defaults: the text
// model's sizes as Gemma4UnifiedTextConfig declares them, written out
// (2304 wide, intermediate 9216, 30 layers, 8 heads, vocab 262,144: memsh
// reads no default for them), the rest left out (4 kv heads, heads of
// 256 and 512, window 1024; Gemma4UnifiedVisionConfig's mm_embed_dim
// 3840, Gemma4UnifiedAudioConfig's 640): transformers 5.25.0 builds 3,056,257,024
// parameters (gemma4uvl.py --params; embed_vision 44,024,064, embed_audio
// 1,474,560), the text model alone 3,010,758,400. No released config.json
// is reachable from here (the docstrings name google/gemma-4-12B-it),
// so the count is the one transformers builds from the classes' defaults.
// Before 5.10 the type is refused (the 5.9.0 wheel has no
// models/gemma4_unified); "all" (bidirectional text) is refused as for
// Gemma 4, and so is an output_proj_dims other than mm_embed_dim (the
// embedder's forward fails on it).
func TestGemma4UnifiedConfig(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "gemma4-unified-defaults.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 3_056_257_024 {
		t.Errorf("defaults: %d parameters, want 3,056,257,024", got)
	}
	text := readHF(t, "gemma4-unified-text-tiny.json")
	_, err = hf.FromConfigOptions(text, hf.Options{Attn: "sdpa", Transformers: "5.9.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "gemma4_unified_text" needs transformers 5.10 or later`) {
		t.Errorf("transformers 5.9.0: error %v, want one naming 5.10", err)
	}
	for _, tc := range []struct {
		file, from, to, want string
	}{
		{"gemma4-unified-text-tiny.json", `"num_kv_shared_layers": 0`, `"use_bidirectional_attention": "all"`, `"use_bidirectional_attention" "all" (bidirectional text attention) is not modelled`},
		{"gemma4-unified-tiny.json", `"output_proj_dims": 48`, `"output_proj_dims": 64`, `"vision_config.output_proj_dims" (64) must equal mm_embed_dim (48)`},
		{"gemma4-unified-tiny.json", `"audio_embed_dim": 40`, `"audio_embed_dim": 40, "hidden_size": 32, "output_proj_dims": 16`, `"audio_config.output_proj_dims" (16) and "audio_config.hidden_size" (32) both set audio_embed_dim`},
	} {
		cfg := string(readHF(t, tc.file))
		if !strings.Contains(cfg, tc.from) {
			t.Fatalf("%s has no %s", tc.file, tc.from)
		}
		_, err := hf.FromConfig([]byte(strings.Replace(cfg, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %s: error %v, want one with %s", tc.file, tc.to, err, tc.want)
		}
	}
	audio := strings.Replace(string(readHF(t, "gemma4-unified-tiny.json")), `"audio_embed_dim": 40`, `"audio_embed_dim": 40, "hidden_size": 32`, 1)
	m, err = hf.FromConfig([]byte(audio), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(731_248-8*128); got != want {
		t.Errorf("audio_config.hidden_size 32: %d parameters, want %d (it sets audio_embed_dim)", got, want)
	}
}
