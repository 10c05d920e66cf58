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
//
// LLaVA-NeXT's and LLaVA-OneVision's (llava_next, llava_onevision; counted
// with `cd tools/oracle && /work/venv-t/bin/python llava_next.py
// ../../sim/testdata/hf/CONFIG --params`; the projector's share below
// leaves image_newline out):
//
// testdata/hf/llava-v1.6-mistral-7b-hf.json is llava-hf/llava-v1.6-mistral-7b-hf's
// config.json as NVIDIA/TensorRT-LLM's LLaVA-NeXT test carries it
// (tests/unittest/_torch/modeling/test_modeling_llava_next.py,
// LLAVA_NEXT_7B_CONFIG), its vision num_hidden_layers put back to 24 (the
// test cut it to 2, "24 layers for full model"): 7,566,747,648, "7.57B"
// as the hub rounds it; CLIP ViT-L/14-336 303,507,456 (its unread last
// layer and post_layernorm included), the projector 20,979,712,
// image_newline 4,096, Mistral-7B-Instruct-v0.2 with 32,064 tokens and
// its own lm_head. LlavaNextConfig ties the head by its top-level
// tie_word_embeddings alone (text_config's is not forwarded).
//
// testdata/hf/llava-onevision-qwen2-7b-ov-hf.json is the config
// transformers' conversion writes (models/llava_onevision/
// convert_llava_onevision_weights_to_hf.py: Qwen/Qwen2-7B-Instruct's
// text config, its vocabulary resized by two tokens to a multiple of 64,
// 152,128; SiglipVisionConfig 1152 wide, 26 layers, 384 pixels, patch 14,
// vision_use_head False), not the hub's file (not found here):
// 8,030,807,584, "8.03B"; SigLIP so400m without its last layer 397,747,744,
// the projector 16,980,992, image_newline 3,584. Without a vision_config
// LlavaOnevisionConfig makes that tower; a vision_config of its own takes
// SiglipVisionConfig's defaults, the pooling head (vision_use_head true)
// among them: registered, though nothing reads it. Either
// tie_word_embeddings ties the head.
func TestLlavaParams(t *testing.T) {
	llavaNext, onevision := "llava-v1.6-mistral-7b-hf.json", "llava-onevision-qwen2-7b-ov-hf.json"
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
		{llavaNext, "llava-v1.6-mistral-7b", nil, 7_566_747_648, 303_507_456, 20_979_712},
		{llavaNext, "top level ties", func(c map[string]any) { c["tie_word_embeddings"] = true }, 7_435_413_504, 303_507_456, 20_979_712},
		{llavaNext, "text_config does not tie", func(c map[string]any) { textConfig(c)["tie_word_embeddings"] = true }, 7_566_747_648, 303_507_456, 20_979_712},
		{llavaNext, "no vision_config", func(c map[string]any) { delete(c, "vision_config") }, 7_566_747_648, 303_507_456, 20_979_712},
		{llavaNext, "no projector bias", func(c map[string]any) { c["multimodal_projector_bias"] = false }, 7_566_739_456, 303_507_456, 20_971_520},
		{llavaNext, "vicuna text", func(c map[string]any) {
			tc := textConfig(c)
			tc["model_type"], tc["intermediate_size"], tc["num_key_value_heads"] = "llama", 11008, 32
		}, 7_063_431_168, 303_507_456, 20_979_712},
		{onevision, "llava-onevision-qwen2-7b-ov", nil, 8_030_807_584, 397_747_744, 16_980_992},
		{onevision, "no vision_config", func(c map[string]any) { delete(c, "vision_config") }, 8_030_807_584, 397_747_744, 16_980_992},
		{onevision, "text_config ties", func(c map[string]any) { textConfig(c)["tie_word_embeddings"] = true }, 7_485_580_832, 397_747_744, 16_980_992},
		{onevision, "bare vision_config", func(c map[string]any) { c["vision_config"] = map[string]any{"model_type": "siglip_vision_model"} },
			7_724_567_808, 92_884_224, 15_604_736},
		{onevision, "pooling head", func(c map[string]any) { delete(visionConfig(c), "vision_use_head") }, 8_046_045_936, 412_986_096, 16_980_992},
		{"llava-next-tiny.json", "tiny", nil, 256_608, 45_152, 6_272},
		{"llava-onevision-tiny.json", "tiny onevision", nil, 256_768, 45_056, 6_272},
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
		var newline int64 // LLaVA-NeXT's and OneVision's image_newline
		if l := layerOf[*nn.LlavaVision](m); l != nil {
			v = l
			if l.AnyRes != nil {
				newline = l.TextDim
			}
		} else if p := layerOf[*nn.PixtralVision](m); p != nil {
			v = p
		}
		if v == nil || v.TowerParams() != tc.tower || v.Params()-v.TowerParams()-newline != tc.prj {
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
