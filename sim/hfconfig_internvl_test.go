package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// The tiny InternVL's parameters as InternVLForConditionalGeneration
// counts them on the meta device (transformers 5.25.0,
// tools/oracle/internvl.py CONFIG --params), with its variants: RMSNorms
// (norm_type rms_norm: no biases in the layers' norms), no attention
// biases, and the final layernorm (use_mean_pooling false); q_norm and
// k_norm (use_qk_norm: a weight of 32 each a layer); a Qwen3 text model
// whose head is tied at both levels (InternVLConfig's default and
// text_config's); InternViT-6B's vision_config (InternVL3-78B's,
// InternVL3.5-38B's and up: 45 layers of 3200, 25 heads, MLPs of 12800,
// rms_norm, use_qk_norm, no attention bias, mean pooling, as OpenGVLab's
// intern_vit_6b config and its conversion to internvl_vision set it) on
// the tiny text model, its tower 5,536,496,000 parameters.
func TestInternVLParams(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		edit                   func(c map[string]any)
		want, tower, projector int64
	}{
		{"internvl-tiny", nil, 254_688, 36_640, 12_672},
		{"rms_norm, no attention bias, final layernorm", func(c map[string]any) {
			visionConfig(c)["norm_type"] = "rms_norm"
			visionConfig(c)["use_mean_pooling"] = false
			visionConfig(c)["attention_bias"] = false
		}, 254_432, 36_384, 12_672},
		{"qk norm", func(c map[string]any) {
			visionConfig(c)["norm_type"] = "rms_norm"
			visionConfig(c)["use_mean_pooling"] = false
			visionConfig(c)["attention_bias"] = false
			visionConfig(c)["use_qk_norm"] = true
		}, 254_560, 36_512, 12_672},
		{"InternViT-6B", func(c map[string]any) {
			for k, v := range map[string]any{"hidden_size": 3200, "num_attention_heads": 25, "intermediate_size": 12800, "num_hidden_layers": 45,
				"norm_type": "rms_norm", "use_qk_norm": true, "attention_bias": false, "image_size": []any{448, 448}, "patch_size": []any{14, 14},
				"use_mean_pooling": true} {
				visionConfig(c)[k] = v
			}
		}, 5_537_550_400, 5_536_496_000, 849_024},
		{"qwen3, tied", func(c map[string]any) {
			delete(c, "tie_word_embeddings")
			c["text_config"] = map[string]any{"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
				"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1024, "tie_word_embeddings": true}
		}, 188_960, 36_640, 12_672},
	} {
		m, err := hf.FromConfigOptions(editConfig(t, "internvl-tiny.json", tc.edit), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(tc.name, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, transformers %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
		v := layerOf[*nn.InternVLVision](m)
		if v == nil || v.TowerParams() != tc.tower || v.Params()-v.TowerParams() != tc.projector {
			t.Errorf("%s: the vision tower and projector are not %d and %d parameters: %+v", tc.name, tc.tower, tc.projector, v)
		}
	}
}

// What InternVL's configs may say that memsh does not model is refused,
// naming the key.
func TestInternVLRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c map[string]any)
		opts hf.Options
		want string
	}{
		{"4.51", nil, hf.Options{Attn: "sdpa", Transformers: "4.51.3"}, `model_type "internvl" needs transformers 4.52 or later`},
		{"text model", func(c map[string]any) { textConfig(c)["model_type"] = "llama" }, hf.Options{Attn: "sdpa"},
			`"text_config.model_type" must be "qwen2" (InternVL3) or "qwen3" (InternVL3.5) (got "llama")`},
		{"vision model", func(c map[string]any) { visionConfig(c)["model_type"] = "siglip_vision_model" }, hf.Options{Attn: "sdpa"},
			`"vision_config.model_type" must be InternViT's, "internvl_vision"`},
		{"norm type", func(c map[string]any) { visionConfig(c)["norm_type"] = "batch_norm" }, hf.Options{Attn: "sdpa"},
			`"vision_config.norm_type" must be "layer_norm" or "rms_norm" (got "batch_norm")`},
		{"oblong tiles", func(c map[string]any) { visionConfig(c)["image_size"] = []any{56, 84} }, hf.Options{Attn: "sdpa"},
			`"vision_config.image_size" is [56, 84]: memsh models square sizes`},
		{"bad side", func(c map[string]any) { visionConfig(c)["patch_size"] = []any{14, -1} }, hf.Options{Attn: "sdpa"},
			`"vision_config.patch_size" must be positive`},
		{"feature layer", func(c map[string]any) { c["vision_feature_layer"] = -2 }, hf.Options{Attn: "sdpa"},
			`"vision_feature_layer" is -2: memsh models the last layer's features only`},
		{"select strategy", func(c map[string]any) { c["vision_feature_select_strategy"] = "full" }, hf.Options{Attn: "sdpa"},
			`"vision_feature_select_strategy" is "full": memsh models "default"`},
		{"downsample ratio", func(c map[string]any) { c["downsample_ratio"] = 0.3 }, hf.Options{Attn: "sdpa"},
			`"downsample_ratio" is 0.3; memsh models 1/k for a whole k`},
		{"dropout", func(c map[string]any) { visionConfig(c)["attention_dropout"] = 0.1 }, hf.Options{Attn: "sdpa"},
			`"vision_config.attention_dropout" is 0.1`},
	} {
		_, err := hf.FromConfigOptions(editConfig(t, "internvl-tiny.json", tc.edit), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The tiny InternVL lowers as transformers 5.25 names it, the same
// parameters with images or without; images that need more tokens than
// seq are refused naming the processor's tiles.
func TestInternVLLowering(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "internvl-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	checkParamNames(t, p, []string{"model.language_model.embed_tokens.weight", "model.language_model.layers.1.mlp.down_proj.weight", "lm_head.weight",
		"model.vision_tower.embeddings.cls_token", "model.vision_tower.embeddings.position_embeddings",
		"model.vision_tower.embeddings.patch_embeddings.projection.bias", "model.vision_tower.encoder.layer.1.lambda_2",
		"model.vision_tower.encoder.layer.0.attention.projection_layer.weight", "model.vision_tower.encoder.layer.1.attention.q_proj.bias",
		"model.vision_tower.encoder.layer.0.layernorm_after.bias", "model.multi_modal_projector.layer_norm.weight",
		"model.multi_modal_projector.linear_2.bias"}, core.Images{Count: 1, Height: 56, Width: 112})
	// 100 x 300 pixels: 6 x 2 tiles and a thumbnail, 52 image tokens and
	// <img>, </img>: 54 an image
	p.Images, p.Seq = core.Images{Count: 2, Height: 100, Width: 300}, 64
	if _, err := p.LowerProgram(); err == nil || !strings.Contains(err.Error(), "2 images of 100x300 pixels: 13 tiles an image") {
		t.Errorf("error %v, want the tiles named", err)
	}
}

// InternViT-6B's q_norm and k_norm lower under the names transformers
// 5.25 gives them, the same with images as without.
func TestInternVLQKNormNames(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "internvl-qknorm-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	for _, im := range []core.Images{{}, {Count: 1, Height: 56, Width: 112}} {
		p.Images = im
		names := loweredParamNames(t, p)
		for _, n := range []string{"model.vision_tower.encoder.layer.0.attention.q_norm.weight", "model.vision_tower.encoder.layer.1.attention.k_norm.weight"} {
			if !names[n] {
				t.Errorf("%+v: no parameter %s", im, n)
			}
		}
		if names["model.vision_tower.encoder.layer.0.attention.q_norm.bias"] {
			t.Errorf("%+v: q_norm has a bias; InternVLVisionRMSNorm has none", im)
		}
	}
}
