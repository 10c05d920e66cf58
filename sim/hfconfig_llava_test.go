package sim

import (
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
	} {
		m, err := hf.FromConfigOptions(editConfig(t, tc.file, tc.edit), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(tc.name, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
		v := layerOf[*nn.LlavaVision](m)
		if v == nil || v.TowerParams() != tc.tower || v.Params()-v.TowerParams() != tc.prj {
			t.Errorf("%s: the vision tower and projector are not %d and %d parameters: %+v", tc.name, tc.tower, tc.prj, v)
		}
	}
}
