package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// Qwen2-VL's parameters as Qwen2VLForConditionalGeneration counts them on
// the meta device (transformers 5.25.0, torch 2.15.0:
// tools/oracle/qwen2vl.py CONFIG --params), model.visual's among them.
// The three hub configs (sim/testdata/hf/qwen2-vl-*-instruct.json, as
// Qwen/Qwen2-VL-2B-, 7B- and 72B-Instruct ship them: a tower of 32 blocks
// 1280 wide, 16 heads, mlp_ratio 4) count what their safetensors hold: the
// hub's model pages give 2.21B, 8.29B and 73.4B parameters (BF16).
func TestQwen2VLParams(t *testing.T) {
	for _, tc := range []struct {
		config       string
		want, visual int64
	}{
		{"qwen2-vl-tiny.json", 173_056, 79_552},
		{"qwen2-vl-2b-instruct.json", 2_208_985_600, 665_271_296},
		{"qwen2-vl-7b-instruct.json", 8_291_375_616, 675_759_104},
		{"qwen2-vl-72b-instruct.json", 73_405_560_320, 699_356_672},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: "flash"})
		if err != nil {
			t.Fatal(tc.config, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, transformers %d (%+d)", tc.config, got, tc.want, got-tc.want)
		}
		if v := layerOf[*nn.VisionTower](m); v == nil || !v.Qwen2VL || v.Params() != tc.visual {
			t.Errorf("%s: the tower is not Qwen2-VL's of %d parameters: %+v", tc.config, tc.visual, v)
		}
	}
}

// What Qwen2-VL's configs may say that memsh cannot build is refused,
// naming the key; a release before the model type's first is refused
// (Qwen2.5-VL's too).
func TestQwen2VLRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c map[string]any)
		opts hf.Options
		want string
	}{
		{"4.44", nil, hf.Options{Attn: "sdpa", Transformers: "4.44.2"}, `model_type "qwen2_vl" needs transformers 4.45 or later`},
		{"qwen2_5_vl 4.48", func(c map[string]any) { c["model_type"] = "qwen2_5_vl" }, hf.Options{Attn: "sdpa", Transformers: "4.48.3"},
			`model_type "qwen2_5_vl" needs transformers 4.49 or later`},
		{"eager", nil, hf.Options{Attn: "eager"}, "the vision tower's eager attention is not modelled"},
		{"heads", func(c map[string]any) { visionConfig(c)["num_heads"] = 5 }, hf.Options{Attn: "sdpa"},
			`"vision_config.num_heads" (5) must divide "vision_config.embed_dim" (32)`},
		{"mlp ratio", func(c map[string]any) { visionConfig(c)["mlp_ratio"] = -1 }, hf.Options{Attn: "sdpa"},
			`"vision_config.mlp_ratio" must be a positive number`},
		{"tiny mlp", func(c map[string]any) { visionConfig(c)["mlp_ratio"] = 0.01 }, hf.Options{Attn: "sdpa"},
			`"vision_config.mlp_ratio" (0.01) x embed_dim (32) is under one`},
		{"activation", func(c map[string]any) { visionConfig(c)["hidden_act"] = "softplus" }, hf.Options{Attn: "sdpa"},
			`"vision_config.hidden_act" names an activation memsh does not know`},
		{"width", func(c map[string]any) { visionConfig(c)["hidden_size"] = 48 }, hf.Options{Attn: "sdpa"},
			`hidden_size (48) must be the language model's hidden_size (64)`},
		{"no embed_dim", func(c map[string]any) { delete(visionConfig(c), "embed_dim") }, hf.Options{Attn: "sdpa"},
			`config.json has no "vision_config.embed_dim"`},
	} {
		_, err := hf.FromConfigOptions(editConfig(t, "qwen2-vl-tiny.json", tc.edit), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The tiny Qwen2-VL lowers as transformers names it, the same parameters
// with images or without.
func TestQwen2VLLowering(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "qwen2-vl-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	checkParamNames(t, p, []string{"model.language_model.embed_tokens.weight", "model.language_model.layers.1.mlp.down_proj.weight",
		"model.visual.patch_embed.proj.weight", "model.visual.blocks.1.norm1.bias", "model.visual.blocks.0.attn.qkv.bias",
		"model.visual.blocks.1.mlp.fc1.bias", "model.visual.blocks.0.mlp.fc2.weight", "model.visual.merger.ln_q.bias",
		"model.visual.merger.mlp.2.weight"}, core.Images{Count: 1, Height: 56, Width: 84})
}

// A Qwen2.5-VL vision_config without window_size and
// fullatt_block_indexes takes Qwen2_5_VLVisionConfig's defaults (112
// pixels; blocks 7, 15, 23, 31: configuration_qwen2_5_vl.py, 5.25.0), which
// Qwen2.5-VL-3B-Instruct's config states: the same tower and the same
// step time with an image (the windows change the attention's FLOPs, not
// what its kernels save). It read as full attention in every block before.
func TestQwen25VLVisionDefaults(t *testing.T) {
	stated, err := hf.FromConfigOptions(readHF(t, "qwen2.5-vl-3b-instruct.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	left, err := hf.FromConfigOptions(editConfig(t, "qwen2.5-vl-3b-instruct.json", func(c map[string]any) {
		delete(visionConfig(c), "window_size")
		delete(visionConfig(c), "fullatt_block_indexes")
	}), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := layerOf[*nn.VisionTower](stated), layerOf[*nn.VisionTower](left)
	if a.Window != 112 || b.Window != a.Window || fmt.Sprint(b.FullBlocks) != fmt.Sprint(a.FullBlocks) || fmt.Sprint(a.FullBlocks) != "[7 15 23 31]" {
		t.Errorf("defaults: window %d, full blocks %v; the stated config's %d, %v", b.Window, b.FullBlocks, a.Window, a.FullBlocks)
	}
	step := func(m *core.Model) float64 {
		p := tinyPlan(t, m)
		p.Seq, p.Images = 1024, core.Images{Count: 1, Height: 448, Width: 448}
		return evalPlan(t, p).Time.StepSeconds
	}
	if x, y := step(stated), step(left); x != y {
		t.Errorf("one 448 x 448 image: a step of %g s with the defaults, %g s as stated", y, x)
	}
}
