package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// GLM-4.1V-9B-Thinking's parameters: 10,292,777,472, its tower
// (model.visual) 892,498,432 of them, as transformers 5.25.0 counts them on
// the meta device for glm-4.1v-9b-thinking.json
// (python tools/oracle/glm4v.py CONFIG --params: Glm4vForConditionalGeneration);
// the model card's "10.3B". The config is zai-org/GLM-4.1V-9B-Thinking's
// config.json as public code transcribes it (its text_config: GLM-4-9B-0414's
// shapes, whose 9,400,279,040 TestGLM4Params checks; its vision_config:
// llama.cpp's ggml-org/llama.cpp#16600 lists the tower's 24 blocks of
// 1536, patches of 14 pixels of a 336-pixel grid). The tower: patch_embed
// 1536 x 1,176 + 1536, the 24 x 24 position table, 24 blocks of 28,314,624
// (qkv and proj without biases, MLPs of out_hidden_size 4096), downsample
// 4096 x 1536 x 2 x 2 + 4096 and the merger 185,081,856 (proj, its
// LayerNorm, a gated MLP of intermediate_size 13696).
//
// GLM-4.5V (glm4v_moe) 107,710,927,360, its tower 858,681,856 (the
// merger's MLP of intermediate_size 10944), the same script on
// glm-4.5v.json: zai-org/GLM-4.5V's config.json as public code transcribes
// it (NVIDIA Megatron-Bridge's GLM-4.5V toy test keeps its keys); the card's
// 108 B. Its text model is GLM-4.5-Air's without the MTP layer, which
// transformers does not build: 106,852,245,504 (TestFromHFConfigParams).
func TestGLM4VParams(t *testing.T) {
	for _, tc := range []struct {
		file          string
		params, tower int64
	}{
		{"glm-4.1v-9b-thinking.json", 10_292_777_472, 892_498_432},
		{"glm4v-tiny.json", 203_808, 90_848},
		{"glm-4.5v.json", 107_710_927_360, 858_681_856},
		{"glm4v-moe-tiny.json", 209_952, 90_848},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "flash"})
		if err != nil {
			t.Fatal(tc.file, err)
		}
		if got := m.Params(); got != tc.params {
			t.Errorf("%s: %d parameters, transformers %d (%+d)", tc.file, got, tc.params, got-tc.params)
		}
		v := layerOf[*nn.Glm4vVisionTower](m)
		if v == nil {
			t.Fatalf("%s: no GLM-4V vision tower", tc.file)
		}
		if got := v.Params(); got != tc.tower {
			t.Errorf("%s: the tower has %d parameters, transformers %d", tc.file, got, tc.tower)
		}
	}
}

// The text model's saved storages, in the step without images, against
// tools/oracle/glm4v.py's "without" figure (the same commands as
// TestGLM4VImagesSaveAsTransformers: 2 112 168 64, and with bf16), on
// torch's CPU kernels (runtime="cpu"): 856,332 and 542,988 bytes, the
// loss's labels padded by one before they are shifted (a storage of 65
// int64: core's loss_labels.go) among them. Unlike
// glm4's text model, which repeats the rotary pair in every layer, the
// GLM-4V text model makes its [1, 64, 8] cos and sin once and every layer
// saves them. glm4v-moe-tiny.json (GLM-4.5V's MoE text model), measured as
// the graph holds them when the backward starts:
//
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-moe-tiny.json 2 112 168 64 atbackward
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/glm4v-moe-tiny.json 2 112 168 64 atbackward bf16
//
// 763,420 and 482,844 bytes, less the same 8. Its router
// (Glm4vMoeTextTopkRouter) picks the expert groups with autograd on: the
// group topks' int64 indices and masked_fill's bool mask, 1,792 bytes a
// MoE layer here, are packed but die with the router's locals (nothing
// downstream reaches their nodes), so a harness that holds every packed
// tensor counts them and this one does not.
func TestGLM4VTextSavesAsTransformers(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		config    string
		params    int64
		precision string
		want      int64
	}{
		{"glm4v-tiny.json", 203_808, "fp32", 856_332},
		{"glm4v-tiny.json", 203_808, "bf16", 542_988},
		{"glm4v-moe-tiny.json", 209_952, "fp32", 763_420},
		{"glm4v-moe-tiny.json", 209_952, "bf16", 482_844},
	} {
		p := visionPlan(t, tc.config, hf.Options{Attn: "sdpa"}, tc.params, tc.precision)
		p.Runtime = cpu
		if got := evalPlan(t, p).SavedActivations; got != tc.want {
			t.Errorf("%s %s: the text step saves %d bytes, transformers %d (%+d)", tc.config, tc.precision, got, tc.want, got-tc.want)
		}
	}
}

// What hf_config and the tower refuse, each with the key or the input
// that is wrong.
func TestGLM4VRefusals(t *testing.T) {
	tiny := string(readHF(t, "glm4v-tiny.json"))
	for _, tc := range []struct {
		what, from, to, want string
	}{
		{"the mrope sections do not split the rotary frequencies", `"mrope_section": [2, 1, 1]`, `"mrope_section": [2, 2, 2]`,
			`text_config.rope_scaling.mrope_section" adds up to 6 frequencies; the rotary embedding has 4`},
		{"the tower's width is not the text model's", `"out_hidden_size": 64`, `"out_hidden_size": 32`,
			`out_hidden_size (32) must be the language model's hidden_size (64)`},
		{"no position table", `"image_size": 56`, `"image_size": 8`, `"vision_config.image_size" (8) is less than patch_size (14)`},
		{"heads too narrow for the 2-D rope", `"num_heads": 2`, `"num_heads": 16`, `leaves heads of 2`},
	} {
		_, err := hf.FromConfigOptions([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), hf.Options{Attn: "sdpa"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.what, err, tc.want)
		}
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "eager"}); err == nil || !strings.Contains(err.Error(), "eager attention is not modelled") {
		t.Errorf("eager: %v, want the tower's refusal", err)
	}
	for _, tc := range []struct {
		what   string
		im     core.Images
		videos core.Videos
		want   string
	}{
		{"images and videos", core.Images{Count: 1, Height: 56, Width: 56}, core.Videos{Count: 1, Frames: 2, Height: 56, Width: 56, FPS: 2},
			"takes images or videos in a step, not both"},
		{"one frame", core.Images{}, core.Videos{Count: 1, Frames: 1, Height: 56, Width: 56, FPS: 2}, "needs at least temporal_patch_size (2)"},
		{"too wide", core.Images{Count: 1, Height: 10, Width: 2500}, core.Videos{}, "aspect ratio over 200"},
		{"too many tokens", core.Images{Count: 4, Height: 112, Width: 168}, core.Videos{}, "4 images of 112x168 pixels: 96 image tokens a sample, more than seq=64"},
	} {
		p := visionPlan(t, "glm4v-tiny.json", hf.Options{Attn: "sdpa"}, 203_808, "bf16")
		p.Images, p.Videos = tc.im, tc.videos
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.what, err, tc.want)
		}
	}
}
