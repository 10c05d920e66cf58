package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// Mistral Small 3.1 (testdata/hf/mistral-small-3.1-24b-instruct-2503.json:
// the hub's config.json as NVIDIA/TensorRT-LLM's
// tests/unittest/_torch/modeling/test_modeling_mistral.py writes it in its
// mistral_small_3_1_24b_config fixture, with the 40 layers its comment says
// it cut to 4; Mistral Small 3.2 ships the same sizes). Counted by
// Mistral3ForConditionalGeneration on the meta device (transformers
// 5.25.0, tools/oracle/mistral3vl.py CONFIG --params): the vision tower
// 403,305,472 and the projector 35,652,608 parameters; the whole model
// 24,011,361,280 with lm_head apart from the embedding, as
// from_pretrained loads the checkpoint, which stores both (the total
// keras-team/keras-hub's mistral3_presets.py gives both 3.1 presets, and
// published for 3.2-24B-Instruct-2506 alike). from_config ties lm_head
// (Mistral3Config's tie_word_embeddings defaults to True, and the file
// states only text_config's false: 23,340,272,640 on the meta device);
// memsh counts what from_pretrained loads (hf/mistral3.go), and ties the
// head when text_config's tie_word_embeddings says so too
// (23,340,272,640, the meta device's count of that file).
// multimodal_projector_bias adds linear_1's and linear_2's biases, 5,120
// each (24,011,371,520 on the meta device).
func TestMistral3Params(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      func(c map[string]any)
		want      int64
		projector int64
	}{
		{"mistral-small-3.1", nil, 24_011_361_280, 35_652_608},
		{"text_config ties the head", func(c map[string]any) { textConfig(c)["tie_word_embeddings"] = true }, 23_340_272_640, 35_652_608},
		{"top level unties it", func(c map[string]any) {
			c["tie_word_embeddings"] = false
			textConfig(c)["tie_word_embeddings"] = true
		}, 24_011_361_280, 35_652_608},
		{"projector biases", func(c map[string]any) { c["multimodal_projector_bias"] = true }, 24_011_371_520, 35_662_848},
	} {
		m, err := hf.FromConfigOptions(editConfig(t, "mistral-small-3.1-24b-instruct-2503.json", tc.edit), hf.Options{Attn: "flash"})
		if err != nil {
			t.Fatal(tc.name, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d (%+d)", tc.name, got, tc.want, got-tc.want)
		}
		v := layerOf[*nn.PixtralVision](m)
		if v == nil || v.TowerParams() != 403_305_472 || v.Params()-v.TowerParams() != tc.projector {
			t.Errorf("%s: the vision tower and projector are not 403,305,472 and %d parameters: %+v", tc.name, tc.projector, v)
		}
	}
}

// Mistral 3's configs are read as transformers reads them, and what memsh
// does not model is refused, naming the key.
func TestMistral3Refused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c map[string]any)
		opts hf.Options
		want string
	}{
		{"4.49", nil, hf.Options{Attn: "sdpa", Transformers: "4.49.0"}, `model_type "mistral3" needs transformers 4.50 or later`},
		{"text model", func(c map[string]any) { textConfig(c)["model_type"] = "qwen2" }, hf.Options{Attn: "sdpa"},
			`"text_config.model_type" must be "mistral" (Mistral Small 3.1, 3.2) or "ministral3" (Ministral 3) (got "qwen2")`},
		{"ministral3 before 5.0", func(c map[string]any) { textConfig(c)["model_type"] = "ministral3" }, hf.Options{Attn: "sdpa", Transformers: "4.57.1"},
			`text_config's model_type "ministral3" needs transformers 5.0 or later`},
		{"ministral3 without its beta", func(c map[string]any) {
			textConfig(c)["model_type"] = "ministral3"
			textConfig(c)["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1e6}
		}, hf.Options{Attn: "sdpa"}, `"text_config.rope_parameters" has no llama_4_scaling_beta`},
		{"vision model", func(c map[string]any) { visionConfig(c)["model_type"] = "siglip_vision_model" }, hf.Options{Attn: "sdpa"},
			`"vision_config.model_type" must be Pixtral's, "pixtral"`},
		{"feature layers", func(c map[string]any) { c["vision_feature_layer"] = []any{-1, -2} }, hf.Options{Attn: "sdpa"},
			`"vision_feature_layer" is a list: memsh models the last layer's features only`},
		{"vision heads", func(c map[string]any) { visionConfig(c)["num_attention_heads"] = 3 }, hf.Options{Attn: "sdpa"},
			`"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size" (1024) into heads of a multiple of 4`},
		{"merge", func(c map[string]any) { c["spatial_merge_size"] = 0 }, hf.Options{Attn: "sdpa"}, `"spatial_merge_size" must be positive`},
		{"dropout", func(c map[string]any) { visionConfig(c)["attention_dropout"] = 0.1 }, hf.Options{Attn: "sdpa"},
			`"vision_config.attention_dropout" is 0.1`},
	} {
		_, err := hf.FromConfigOptions(editConfig(t, "mistral-small-3.1-24b-instruct-2503.json", tc.edit), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A small Mistral 3 lowers as transformers 5.25 names it, the same
// parameters with images or without; images that need more tokens than
// seq, or that scale to nothing, are refused naming the processor.
func TestMistral3Lowering(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "mistral3-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	checkParamNames(t, p, []string{"model.language_model.embed_tokens.weight", "model.language_model.layers.1.mlp.down_proj.weight", "lm_head.weight",
		"model.vision_tower.patch_conv.weight", "model.vision_tower.ln_pre.weight", "model.vision_tower.transformer.layers.1.attention.o_proj.weight",
		"model.vision_tower.transformer.layers.0.feed_forward.gate_proj.weight", "model.multi_modal_projector.patch_merger.merging_layer.weight",
		"model.multi_modal_projector.linear_2.weight"}, core.Images{Count: 1, Height: 56, Width: 56})
	for _, tc := range []struct {
		im   core.Images
		seq  int64
		want string
	}{
		// 112 x 112 pixels: 8 x 8 patches, 16 [IMG] and 4 row breaks an image
		{core.Images{Count: 4, Height: 112, Width: 112}, 64, "4 images of 112x112 pixels: 8x8 patches an image"},
		{core.Images{Count: 1, Height: 1, Width: 5000}, 64, "scaled to less than a pixel a side"},
	} {
		p.Images, p.Seq = tc.im, tc.seq
		if _, err := p.LowerProgram(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.im, err, tc.want)
		}
	}
}

// editConfig is testdata/hf/name with edit applied (nil: as it is).
func editConfig(t *testing.T, name string, edit func(map[string]any)) []byte {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal(readHF(t, name), &c); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(c)
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func textConfig(c map[string]any) map[string]any   { return c["text_config"].(map[string]any) }
func visionConfig(c map[string]any) map[string]any { return c["vision_config"].(map[string]any) }

// Ministral 3's text model alone (model_type ministral3,
// Ministral3ForCausalLM; sim/testdata/hf/ministral3-tiny.json is
// ministral3-vl-tiny.json's text_config): 205,120 parameters on the meta
// device (transformers 5.25.0), its attention scaling q by position, and
// refused before transformers 5.0, which first ships it.
func TestMinistral3TextAlone(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "ministral3-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 205_120 {
		t.Errorf("%d parameters, want 205,120", got)
	}
	if a := layerOf[*nn.Attention](m); a == nil || !a.QPosScale {
		t.Errorf("Ministral 3's attention does not scale q by position: %+v", a)
	}
	_, err = hf.FromConfigOptions(readHF(t, "ministral3-tiny.json"), hf.Options{Attn: "sdpa", Transformers: "4.57.1"})
	if want := `model_type "ministral3" needs transformers 5.0 or later`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("transformers 4.57.1: %v, want %q", err, want)
	}
}

// loweredParamNames is the names of the parameters p's program registers.
func loweredParamNames(t *testing.T, p *core.Plan) map[string]bool {
	t.Helper()
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, pa := range prog.Params {
		out[pa.Name] = true
	}
	return out
}

// checkHasParams holds the parameters of config's model (hf_config,
// sdpa) to names: each must be among them.
func checkHasParams(t *testing.T, config string, names ...string) {
	t.Helper()
	m, err := hf.FromConfig([]byte(config), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	have := loweredParamNames(t, tinyPlan(t, m))
	for _, n := range names {
		if !have[n] {
			t.Errorf("no parameter %s", n)
		}
	}
}

// checkParamNames holds p's lowered parameters to names (each must be
// among them) and to the same set with the images im as without them;
// p is left with im.
func checkParamNames(t *testing.T, p *core.Plan, names []string, im core.Images) {
	t.Helper()
	idle := loweredParamNames(t, p)
	for _, n := range names {
		if !idle[n] {
			t.Errorf("no parameter %s", n)
		}
	}
	p.Images = im
	busy := loweredParamNames(t, p)
	if len(busy) != len(idle) {
		t.Errorf("%d parameters with images, %d without", len(busy), len(idle))
	}
	for n := range busy {
		if !idle[n] {
			t.Errorf("with images: parameter %s is not registered without them", n)
		}
	}
}
