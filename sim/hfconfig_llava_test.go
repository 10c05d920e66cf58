package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// LLaVA's parameters, counted by LlavaForConditionalGeneration on the meta
// device from each config (transformers 5.25.0, torch 2.15.0:
// `/work/venv-t/bin/python tools/oracle/llava.py CONFIG --params`, with
// the edit applied to the file). testdata/hf/llava-1.5-7b-hf.json is
// llava-hf/llava-1.5-7b-hf's config.json as the hub serves it; its count,
// 7,063,427,072, is the hub's safetensors total for that repository: the
// CLIP ViT-L/14-336 tower 303,507,456 (its 24th layer and post_layernorm
// included: registered, though nothing reads them), the projector
// 20,979,712, Vicuna-7B's text model and its untied head. Without a
// vision_config LlavaConfig makes llava-1.5's tower; a vision_config of
// its own takes CLIPVisionConfig's defaults (ViT-B/32 at 224). The head
// is tied when either tie_word_embeddings says so. text_config's absent
// sizes are its model type's defaults (Vicuna's file states none).
//
// With a Pixtral vision_config (mistral-community/pixtral-12b; counted
// with `/work/venv-t/bin/python tools/oracle/mistral3vl.py CONFIG
// --params`): testdata/hf/pixtral-12b-converted.json is the config
// transformers' conversion of Pixtral-12B-2409 writes when the checkpoint
// brings no params.json (huggingface/transformers,
// src/transformers/models/pixtral/convert_pixtral_weights_to_hf.py at
// 069accfa, convert_mistral_model: its MistralConfig, PixtralVisionConfig's
// defaults, vision_feature_layer -1, "full", image_token_index 10), not the
// hub's config.json (not found here). It counts 12,682,739,712: the tower
// 403,489,792 ("a 400 million parameter vision encoder", transformers'
// docs/source/en/model_doc/pixtral.md), LLaVA's projector with its biases
// (LlavaConfig's multimodal_projector_bias, true; no norm, no merger)
// 31,467,520, Mistral NeMo's 12B text model and its untied head.
func TestLlavaParams(t *testing.T) {
	for _, tc := range []struct {
		file       string
		name       string
		edit       func(c map[string]any)
		want       int64
		tower, prj int64
	}{
		{"llava-1.5-7b-hf.json", "llava-1.5-7b", nil, 7_063_427_072, 303_507_456, 20_979_712},
		{"llava-1.5-7b-hf.json", "no projector bias", func(c map[string]any) { c["multimodal_projector_bias"] = false }, 7_063_418_880, 303_507_456, 20_971_520},
		{"llava-1.5-7b-hf.json", "top level ties", func(c map[string]any) { c["tie_word_embeddings"] = true }, 6_932_092_928, 303_507_456, 20_979_712},
		{"llava-1.5-7b-hf.json", "text_config ties", func(c map[string]any) { textConfig(c)["tie_word_embeddings"] = true }, 6_932_092_928, 303_507_456, 20_979_712},
		{"llava-1.5-7b-hf.json", "no vision_config", func(c map[string]any) { delete(c, "vision_config") }, 7_063_427_072, 303_507_456, 20_979_712},
		{"llava-1.5-7b-hf.json", "bare vision_config", func(c map[string]any) { c["vision_config"] = map[string]any{"model_type": "clip_vision_model"} },
			6_846_327_040, 87_456_000, 19_931_136},
		{"llava-1.5-7b-hf.json", "mistral text", func(c map[string]any) { textConfig(c)["model_type"] = "mistral" }, 7_566_743_552, 303_507_456, 20_979_712},
		{"llava-1.5-7b-hf.json", "qwen2 text", func(c map[string]any) { textConfig(c)["model_type"] = "qwen2" }, 11_392_342_016, 303_507_456, 20_979_712},
		{"llava-tiny.json", "tiny", nil, 256_544, 45_152, 6_272},
		{"llava-tiny.json", "tiny, qwen2 text", func(c map[string]any) { textConfig(c)["model_type"] = "qwen2" }, 256_800, 45_152, 6_272},
		{"llava-tiny.json", "tiny, mistral text", func(c map[string]any) { textConfig(c)["model_type"] = "mistral" }, 256_544, 45_152, 6_272},
		{"pixtral-12b-converted.json", "pixtral-12b", nil, 12_682_739_712, 403_489_792, 31_467_520},
		{"pixtral-12b-converted.json", "pixtral-12b, no projector bias", func(c map[string]any) { c["multimodal_projector_bias"] = false },
			12_682_729_472, 403_489_792, 31_457_280},
		{"llava-pixtral-tiny.json", "tiny pixtral", nil, 250_848, 39_456, 6_272},
	} {
		m, err := hf.FromConfigOptions(editConfig(t, tc.file, tc.edit), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(tc.name, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
		var v interface {
			Params() int64
			TowerParams() int64
		}
		if l := layerOf[*nn.LlavaVision](m); l != nil {
			v = l
		} else if p := layerOf[*nn.PixtralVision](m); p != nil {
			v = p
		}
		if v == nil || v.TowerParams() != tc.tower || v.Params()-v.TowerParams() != tc.prj {
			t.Errorf("%s: the vision tower and projector are not %d and %d parameters: %+v", tc.name, tc.tower, tc.prj, v)
		}
	}
}

// What LLaVA with Pixtral's tower does not model is refused, naming the key.
func TestLlavaPixtralRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c map[string]any)
		want string
	}{
		{"default strategy", func(c map[string]any) { delete(c, "vision_feature_select_strategy") },
			`"vision_feature_select_strategy" is "default": a Pixtral tower has no class token to drop`},
		{"default feature layer", func(c map[string]any) { delete(c, "vision_feature_layer") }, `"vision_feature_layer" is LlavaConfig's default, -2`},
		{"feature layer -2", func(c map[string]any) { c["vision_feature_layer"] = -2 }, `"vision_feature_layer" is -2: memsh models the last layer's features only`},
		{"vision heads", func(c map[string]any) { visionConfig(c)["num_attention_heads"] = 3 },
			`"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size" (32) into heads of a multiple of 4`},
		{"dropout", func(c map[string]any) { visionConfig(c)["attention_dropout"] = 0.1 }, `"vision_config.attention_dropout" is 0.1`},
		{"other tower", func(c map[string]any) { visionConfig(c)["model_type"] = "siglip_vision_model" },
			`"vision_config.model_type" must be CLIP's, "clip_vision_model", or Pixtral's, "pixtral" (got "siglip_vision_model")`},
	} {
		_, err := hf.FromConfigOptions(editConfig(t, "llava-pixtral-tiny.json", tc.edit), hf.Options{Attn: "sdpa"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
