package sim

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// Llama4ForConditionalGeneration's parameters, counted against
// transformers 5.17.0 on the meta device (torch 2.15.0;
// tools/oracle/llama4_params.py and llama4vis.py --params): the text
// model's count (TestLlama4Params) plus vision_model (34 layers of 1,408,
// tiles of 336 pixels in patches of 14, the adapter 5,632 -> 4,096 ->
// 4,096) and multi_modal_projector (4,096 -> 5,120): 871,932,416 for both
// Scout and Maverick. Scout's 108,641,793,536 is the model card's "109B
// total parameters", Maverick's 401,583,781,376 its "400B"; the
// safetensors index totals (metadata.total_size, bytes in bf16) were not
// checked: the hub is not reachable from here.
func TestLlama4VisionParams(t *testing.T) {
	for _, tc := range []struct {
		file string
		want int64
	}{
		{"llama-4-scout-17b-16e.json", 108_641_793_536},
		{"llama-4-maverick-17b-128e.json", 401_583_781_376},
		{"llama4-vision-tiny.json", 252_096}, // vision 53,376, projector 3,072
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.file, got, tc.want, got-tc.want)
		}
	}
}

// Names and shapes as transformers 5.17.0's named_parameters() gives them
// for Scout (vision_model, multi_modal_projector and language_model.model
// at the top: Llama4ForConditionalGeneration has no model attribute), the
// head language_model.lm_head.
func TestLlama4VisionNames(t *testing.T) {
	want := map[string][]int64{
		"vision_model.class_embedding":                          {1408},
		"vision_model.positional_embedding_vlm":                 {577, 1408},
		"vision_model.patch_embedding.linear.weight":            {1408, 588},
		"vision_model.layernorm_pre.bias":                       {1408},
		"vision_model.model.layers.0.self_attn.q_proj.weight":   {1408, 1408},
		"vision_model.model.layers.33.self_attn.o_proj.bias":    {1408},
		"vision_model.model.layers.0.mlp.fc1.weight":            {5632, 1408},
		"vision_model.model.layers.0.mlp.fc2.bias":              {1408},
		"vision_model.model.layers.0.input_layernorm.weight":    {1408},
		"vision_model.layernorm_post.weight":                    {1408},
		"vision_model.vision_adapter.mlp.fc1.weight":            {4096, 5632},
		"vision_model.vision_adapter.mlp.fc2.weight":            {4096, 4096},
		"multi_modal_projector.linear_1.weight":                 {5120, 4096},
		"language_model.model.embed_tokens.weight":              {202048, 5120},
		"language_model.model.layers.0.self_attn.k_proj.weight": {1024, 5120},
		"language_model.model.norm.weight":                      {5120},
		"language_model.lm_head.weight":                         {202048, 5120},
	}
	m, err := hf.FromConfigOptions(readHF(t, "llama-4-scout-17b-16e.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	for _, im := range []core.Images{{}, {Count: 1, Height: 336, Width: 336}} {
		p := tinyPlan(t, m)
		p.Seq, p.Images = 256, im
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, p := range prog.Params {
			if shape, ok := want[p.Name]; ok {
				seen++
				if !equalShape(p.Shape, shape) {
					t.Errorf("%v: %s: shape %v, want %v", im, p.Name, p.Shape, shape)
				}
			}
			if strings.HasPrefix(p.Name, "model.") {
				t.Errorf("%v: %s: Llama4ForConditionalGeneration has no model attribute", im, p.Name)
			}
		}
		if seen != len(want) {
			t.Errorf("%v: found %d of the %d named parameters", im, seen, len(want))
		}
	}
}

// The tiles Llama4ImageProcessor makes of an image (tiles of 336 pixels,
// max_patches 16, a global tile beside several), as its own
// find_supported_resolutions and get_best_fit pick the canvas
// (transformers 5.17.0, torch 2.15.0: the two functions run on each size,
// the canvas in the comment).
func TestLlama4Tiles(t *testing.T) {
	for _, tc := range []struct{ h, w, want int64 }{
		{336, 336, 1},    // 1 x 1
		{100, 100, 1},    // 1 x 1
		{337, 336, 3},    // 2 x 1
		{672, 672, 5},    // 2 x 2
		{1080, 1920, 16}, // 3 x 5
		{1920, 1080, 16}, // 5 x 3
		{4000, 3000, 13}, // 4 x 3
		{500, 5000, 11},  // 1 x 10
		{224, 1344, 5},   // 1 x 4
		{700, 400, 7},    // 3 x 2
		{1024, 1024, 17}, // 4 x 4
		{2000, 2000, 17}, // 4 x 4
		{336, 5376, 17},  // 1 x 16
		{1, 1, 1},        // 1 x 1
	} {
		if got := nn.Llama4Tiles(tc.h, tc.w, 336, 16); got != tc.want {
			t.Errorf("%d x %d pixels: %d tiles, the processor makes %d", tc.h, tc.w, got, tc.want)
		}
	}
}

// Scout's image tokens: a 1080 x 1920 image is 15 tiles and the global
// one, 144 tokens each (576 patches of 14 pixels a tile, merged 2 x 2),
// 2,304 tokens among the seq; more than seq is refused at the tower.
func TestLlama4VisionTokens(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "llama-4-scout-17b-16e.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Seq = 4096
	p.Images = core.Images{Count: 1, Height: 1080, Width: 1920}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var pix, tokens []int64
	for _, v := range prog.Values {
		switch v.Name {
		case "vision_model.pixel_values":
			pix = v.Shape
		case "multi_modal_projector.linear_1.out":
			tokens = v.Shape
		}
	}
	if !equalShape(pix, []int64{16, 3, 336, 336}) || !equalShape(tokens, []int64{2304, 5120}) {
		t.Errorf("pixel values %v, image tokens %v; want [16 3 336 336] and [2304 5120]", pix, tokens)
	}
	p.Seq = 2048
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "1 image of 1080x1920 pixels: 16 tiles an image (Llama4ImageProcessor), 144 image tokens a tile, 2304 a sample, more than seq=2048") {
		t.Errorf("too many image tokens: %v", err)
	}
}

// What hf_config refuses of Llama 4's vision model, each error naming the
// key and why.
func TestLlama4VisionRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit map[string]any // vision_config keys; nil deletes
		attn string
		want string
	}{
		{"shuffle", map[string]any{"pixel_shuffle_ratio": 0.3}, "sdpa", `"vision_config.pixel_shuffle_ratio" is 0.3; memsh models 1/2, 1/4, ...`},
		{"adapter width", map[string]any{"intermediate_size": 100}, "sdpa", `"vision_config.intermediate_size" (100) must be "vision_config.hidden_size" x 4 (128); hint: Llama4VisionMLP2.fc1 reads intermediate_size features`},
		{"defaults", map[string]any{"hidden_size": nil, "intermediate_size": nil}, "sdpa", `"vision_config.intermediate_size" (5632) must be "vision_config.hidden_size" x 4 (3072)`},
		{"projector", map[string]any{"vision_output_dim": 7680}, "sdpa", `"vision_config.vision_output_dim" (7680) must be "vision_config.projector_output_dim" (48); hint: multi_modal_projector reads the adapter's output`},
		{"fc2", map[string]any{"projector_output_dim": 64, "vision_output_dim": 64}, "sdpa", `"vision_config.projector_input_dim" (48) must be "vision_config.projector_output_dim" (64)`},
		{"patch", map[string]any{"patch_size": 15}, "sdpa", `"vision_config.patch_size" (15) must divide "vision_config.image_size" (56)`},
		{"heads", map[string]any{"num_attention_heads": 16}, "sdpa", `"vision_config.num_attention_heads" (16) must divide "vision_config.hidden_size" (32) into heads of a multiple of 4`},
		{"dropout", map[string]any{"projector_dropout": 0.1}, "sdpa", `"vision_config.projector_dropout" is 0.1: dropout in the vision adapter is not modelled`},
		{"image list", map[string]any{"image_size": []any{56, 56}}, "sdpa", `"vision_config.image_size"`},
		{"flash", nil, "flash", `no flash-attention path for model_type "llama4"`},
	} {
		var raw map[string]any
		if err := json.Unmarshal(readHF(t, "llama4-vision-tiny.json"), &raw); err != nil {
			t.Fatal(err)
		}
		vc := raw["vision_config"].(map[string]any)
		for k, v := range tc.edit {
			if v == nil {
				delete(vc, k)
			} else {
				vc[k] = v
			}
		}
		data, _ := json.Marshal(raw)
		_, err := hf.FromConfigOptions(data, hf.Options{Attn: tc.attn})
		var ue *units.Error
		if !errors.As(err, &ue) || !strings.Contains(ue.Msg+"; hint: "+ue.Hint, tc.want) {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.want)
		}
	}
	// tensor parallelism is refused at the vision model
	m, err := hf.FromConfigOptions(readHF(t, "llama4-vision-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Parallel.TP = 2
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "Llama 4's vision model is modelled with data parallelism only") {
		t.Errorf("tp=2: %v", err)
	}
}

// Images at the edges of what train(images=) takes reach the tiny Llama 4
// as a step or an error naming them, never a panic: a one-pixel image is
// one tile, a 1 x 65,536 strip a 1 x 16 canvas and the global tile, and
// a million images are more image tokens than any seq.
func TestLlama4VisionImageSizes(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "llama4-vision-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		im   core.Images
		seq  int64
		want string // "" = the step runs
	}{
		{core.Images{Count: 1, Height: 1, Width: 1}, 64, ""},
		{core.Images{Count: 1, Height: 1, Width: 65536}, 128, ""},
		{core.Images{Count: 1, Height: 65536, Width: 65536}, 64, "1 image of 65536x65536 pixels: 17 tiles an image (Llama4ImageProcessor), 4 image tokens a tile"},
		{core.Images{Count: 1 << 20, Height: 56, Width: 56}, 1 << 20, "1048576 images of 56x56 pixels: 1 tile an image (Llama4ImageProcessor), 4 image tokens a tile, 4194304 a sample, more than seq=1048576"},
	} {
		p := tinyPlan(t, m)
		p.Seq, p.Images = tc.seq, tc.im
		_, err := Evaluate(p, core.Options{})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.im, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want %s", tc.im, err, tc.want)
		}
	}
}
