package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What the AnyRes families do not model, or transformers refuses, is
// refused, naming the key.
func TestLlavaNextRefused(t *testing.T) {
	for _, tc := range []struct {
		file, name string
		edit       func(c map[string]any)
		want       string
	}{
		{"llava-next-tiny.json", "feature layers", func(c map[string]any) { c["vision_feature_layer"] = []any{-2, -5} },
			`"vision_feature_layer" is a list: memsh models one feature layer`},
		{"llava-next-tiny.json", "pinpoint not a pair", func(c map[string]any) { c["image_grid_pinpoints"] = []any{[]any{56}} },
			`"image_grid_pinpoints" has a list: each entry must be a [height, width] pair of positive integers`},
		{"llava-next-tiny.json", "pinpoints not a list", func(c map[string]any) { c["image_grid_pinpoints"] = "anyres" },
			`"image_grid_pinpoints" is the string "anyres": it must be a list of [height, width] pairs`},
		{"llava-next-tiny.json", "CLIP, full", func(c map[string]any) { c["vision_feature_select_strategy"] = "full" },
			`AnyRes tiles need 16 features a tile, one a patch (got 17)`},
		{"llava-onevision-tiny.json", "SigLIP, default", func(c map[string]any) { c["vision_feature_select_strategy"] = "default" },
			`AnyRes tiles need 16 features a tile, one a patch (got 15)`},
		{"llava-onevision-tiny.json", "aspect ratio", func(c map[string]any) { c["vision_aspect_ratio"] = "anyres" },
			`"vision_aspect_ratio" must be "anyres_max_N" with N a positive integer (got "anyres")`},
		{"llava-onevision-tiny.json", "other tower", func(c map[string]any) { visionConfig(c)["model_type"] = "pixtral" },
			`"vision_config.model_type" must be CLIP's, "clip_vision_model", or SigLIP's, "siglip_vision_model" (got "pixtral")`},
		{"llava-onevision-tiny.json", "other text", func(c map[string]any) { textConfig(c)["model_type"] = "gemma" },
			`"text_config.model_type" must be "llama"`},
	} {
		_, err := hf.FromConfigOptions(editConfig(t, tc.file, tc.edit), hf.Options{Attn: "sdpa"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// What AnyRes cannot run is refused when images run: more image tokens
// than seq, and pinpoints that are not whole tiles (transformers builds
// the model from any list; its forward needs whole tiles).
func TestLlavaNextImagesRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c map[string]any)
		im   core.Images
		want string
	}{
		{"over seq", nil, core.Images{Count: 1, Height: 112, Width: 112},
			"1 image (AnyRes cuts a 112x112 image into 5 tiles of 56 pixels): 88 image tokens an image, 88 a sample, more than seq=64"},
		{"pinpoint not whole tiles", func(c map[string]any) { c["image_grid_pinpoints"] = []any{[]any{56, 100}} }, core.Images{Count: 1, Height: 56, Width: 56},
			"image_grid_pinpoints has [56, 100]: each must be a multiple of vision_config.image_size (56)"},
		{"no pinpoints", func(c map[string]any) { c["image_grid_pinpoints"] = []any{} }, core.Images{Count: 1, Height: 56, Width: 56},
			"image_grid_pinpoints is empty"},
	} {
		m, err := hf.FromConfigOptions(editConfig(t, "llava-next-tiny.json", tc.edit), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(tc.name, err)
		}
		p := tinyPlan(t, m)
		p.Images = tc.im
		if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
