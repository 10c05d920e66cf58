package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// Idefics3's and SmolVLM's parameters as Idefics3ForConditionalGeneration
// and SmolVLMForConditionalGeneration count them on the meta device
// (transformers 5.25.0, torch 2.15.0: tools/oracle/idefics3.py CONFIG
// --params), the vision model's and the connector's among them; lm_head
// is tied only when the top level's tie_word_embeddings says so
// (smolvlm-tiny.json ties text_config alone: untied). SmolVLM-256M-Instruct
// (sim/testdata/hf/smolvlm-256m-instruct.json: the computational keys of
// the hub's config.json at revision 7e3e67ed, as a public port's
// reference notes list them) counts its single safetensors shard's
// 256,484,928 parameters (471 tensors, lm_head untied); SmolVLM2-500M-Video-
// Instruct's config.json (verbatim from its model card) 507,482,304.
func TestIdefics3Params(t *testing.T) {
	for _, tc := range []struct {
		config                  string
		want, vision, connector int64
	}{
		{"idefics3-tiny.json", 144_480, 23_840, 8_192},
		{"smolvlm-tiny.json", 170_592, 25_376, 32_768},
		{"smolvlm-256m-instruct.json", 256_484_928, 86_433_024, 7_077_888},
		{"smolvlm2-500m-video-instruct.json", 507_482_304, 86_433_024, 11_796_480},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(tc.config, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, transformers %d (%+d)", tc.config, got, tc.want, got-tc.want)
		}
		v := layerOf[*nn.Idefics3Vision](m)
		if v == nil || v.Params()-v.ConnectorParams() != tc.vision || v.ConnectorParams() != tc.connector {
			t.Errorf("%s: the vision model and connector are not %d and %d parameters: %+v", tc.config, tc.vision, tc.connector, v)
		}
	}
}

// The tiles and tokens of an image as the processors make them
// (idefics3_inputs.py's grid, which runs image_processing_idefics3.py's
// functions, transformers 5.25.0): the longest edge to 4 x image_size,
// both edges up to multiples of it, the tiles and the global image. The
// 100 x 80 image at SmolVLM-256M's 512 is 4 x 4 tiles and the global one,
// 1,127 tokens with the tags: the port's reference notes (above) tokenize
// a prompt of it with the real tokenizer to 1,141 tokens, 14 of them
// text.
func TestIdefics3Tiles(t *testing.T) {
	for _, tc := range []struct {
		tile, h, w, rows, cols int64
	}{
		{512, 100, 80, 4, 4}, {512, 1080, 1920, 3, 4}, {512, 480, 640, 3, 4}, {512, 1, 4000, 1, 4}, {512, 3000, 17, 4, 1},
		{364, 1080, 1920, 3, 4}, {384, 512, 512, 4, 4}, {32, 50, 70, 3, 4}, {32, 100, 30, 4, 2}, {64, 50, 70, 3, 4},
	} {
		v := &nn.Idefics3Vision{SquareTile: nn.SquareTile{Image: tc.tile, Patch: 16}, Scale: 4}
		if r, c := v.Grid(tc.h, tc.w); r != tc.rows || c != tc.cols {
			t.Errorf("%dx%d at %d: %dx%d tiles, the processor %dx%d", tc.h, tc.w, tc.tile, r, c, tc.rows, tc.cols)
		}
	}
	v := &nn.Idefics3Vision{SquareTile: nn.SquareTile{Image: 512, Patch: 16}, Scale: 4}
	if n, tok := v.Tiles(100, 80), v.ImageTokens(100, 80); n != 17 || tok != 1127 {
		t.Errorf("100x80 at 512: %d tiles, %d tokens; want 17, 1,127", n, tok)
	}
}

// What Idefics3's and SmolVLM's configs may say that memsh cannot build
// is refused, naming the key.
func TestIdefics3Refused(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		edit         func(c map[string]any)
		opts         hf.Options
		want         string
	}{
		{"4.45", "idefics3-tiny.json", nil, hf.Options{Attn: "sdpa", Transformers: "4.45.2"}, `model_type "idefics3" needs transformers 4.46 or later`},
		{"4.49", "smolvlm-tiny.json", nil, hf.Options{Attn: "sdpa", Transformers: "4.49.0"}, `model_type "smolvlm" needs transformers 4.50 or later`},
		{"text model", "idefics3-tiny.json", func(c map[string]any) { textConfig(c)["model_type"] = "mistral" }, hf.Options{Attn: "sdpa"},
			`"text_config.model_type" must be "llama" (got "mistral")`},
		{"heads", "idefics3-tiny.json", func(c map[string]any) { visionConfig(c)["num_attention_heads"] = 3 }, hf.Options{Attn: "sdpa"},
			`"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size" (32)`},
		{"patch", "idefics3-tiny.json", func(c map[string]any) { visionConfig(c)["patch_size"] = 64 }, hf.Options{Attn: "sdpa"},
			`"vision_config.patch_size" (64) is larger than "vision_config.image_size" (32)`},
		{"scale", "smolvlm-tiny.json", func(c map[string]any) { c["scale_factor"] = 3 }, hf.Options{Attn: "sdpa"},
			`"scale_factor" (3) must divide the 8 patches of a tile's side`},
		{"dropout", "idefics3-tiny.json", func(c map[string]any) { visionConfig(c)["attention_dropout"] = 0.1 }, hf.Options{Attn: "sdpa"},
			`"vision_config.attention_dropout" is 0.1`},
		{"no text", "idefics3-tiny.json", func(c map[string]any) { delete(c, "text_config") }, hf.Options{Attn: "sdpa"},
			`config.json has no "text_config" object`},
	} {
		_, err := hf.FromConfigOptions(editConfig(t, tc.config, tc.edit), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The tiny Idefics3 lowers as transformers names it, the same parameters
// with images or without; seq holds the images' tokens with their tags
// exactly, one less is refused naming the tiles.
func TestIdefics3Lowering(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "idefics3-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Seq = 128
	checkParamNames(t, p, []string{"model.text_model.embed_tokens.weight", "model.text_model.layers.1.mlp.down_proj.weight", "lm_head.weight",
		"model.vision_model.embeddings.patch_embedding.bias", "model.vision_model.embeddings.position_embedding.weight",
		"model.vision_model.encoder.layers.1.self_attn.out_proj.bias", "model.vision_model.encoder.layers.0.mlp.fc2.weight",
		"model.vision_model.post_layernorm.bias", "model.connector.modality_projection.proj.weight"}, core.Images{Count: 1, Height: 50, Width: 70})
	// 2 images of 50 x 70: 13 tiles, 82 tokens each
	p.Images = core.Images{Count: 2, Height: 50, Width: 70}
	for _, seq := range []int64{164, 163} {
		p.Seq = seq
		_, err := p.LowerProgram()
		if fits := seq == 164; fits != (err == nil) || !fits && !strings.Contains(err.Error(), "2 images of 50x70 pixels: 13 tiles an image (3x4 and the whole image") {
			t.Errorf("seq=%d: error %v", seq, err)
		}
	}
}
