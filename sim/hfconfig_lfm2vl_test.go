package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// LFM2-VL's parameters as Lfm2VlForConditionalGeneration counts them on
// the meta device (transformers 5.25.0, torch 2.15.0: tools/oracle/lfm2vl.py
// CONFIG --params), the tower's and the projector's among them.
// lfm2-vl-450m.json is LFM2-VL-450M's config.json as a public copy of the
// checkpoint stores it (varun00391/local-finetuned-model at a913c339,
// written for the remote code of transformers 4.55: model_type "lfm2-vl"
// and image_token_index renamed to lfm2_vl's; every size as stored):
// 450,822,656, the model card's 450M, its tower 85,843,200 (the card's
// SigLIP2 NaFlex base, 86M). lfm2_vl-nonorm-tiny.json has no projector
// LayerNorm and an untied head; lfm2_vl-moe-tiny.json's text model is
// lfm2_moe-tiny.json's LFM2-MoE.
func TestLFM2VLParams(t *testing.T) {
	for _, tc := range []struct {
		config                  string
		want, vision, projector int64
	}{
		{"lfm2_vl-tiny.json", 238_576, 19_232, 9_584},
		{"lfm2_vl-nonorm-tiny.json", 256_240, 20_768, 9_328},
		{"lfm2_vl-moe-tiny.json", 227_312, 19_232, 9_584},
		{"lfm2-vl-450m.json", 450_822_656, 85_843_200, 10_495_488},
	} {
		opts := hf.Options{Attn: "sdpa"}
		if strings.Contains(tc.config, "tiny") {
			opts.Processor = lfm2VLProcessor("")
		}
		m, err := hf.FromConfigOptions(readHF(t, tc.config), opts)
		if err != nil {
			t.Fatal(tc.config, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, transformers %d (%+d)", tc.config, got, tc.want, got-tc.want)
		}
		v := layerOf[*nn.Lfm2VlVision](m)
		if v == nil || v.Params()-v.ProjectorParams() != tc.vision || v.ProjectorParams() != tc.projector {
			t.Errorf("%s: the tower and projector are not %d and %d parameters: %+v", tc.config, tc.vision, tc.projector, v)
		}
	}
}

// An image's tiles and tokens as Lfm2VlImageProcessor and Lfm2VlProcessor
// make them (tools/oracle/lfm2vl.py --tokens [proc=FILE] H W ..., which
// runs image_processing_lfm2_vl.py's layout functions and
// processing_lfm2_vl.py's token counts, transformers 5.25.0): the
// processor's defaults (tiles of 512 pixels in patches of 16, 64 to 256
// tokens an image, 2 to 10 tiles and a thumbnail), and with use_thumbnail
// false, 32 to 128 tokens and at most 4 tiles. tiles counts the thumbnail,
// last the patches of the last tile or image; tokens are the image's
// tokens with its tags. The model card of LFM2-VL-3B maps a 256 x 384
// image to 96 tokens: the 98 here less <|image_start|> and <|image_end|>.
func TestLFM2VLImageLayout(t *testing.T) {
	def := &nn.Lfm2VlVision{Patch: 16, Factor: 2, Proc: nn.Lfm2VlProcessorDefaults}
	small := *def
	small.Proc.Thumbnail, small.Proc.MinTokens, small.Proc.MaxTokens, small.Proc.MaxTiles = false, 32, 128, 4
	for _, tc := range []struct {
		v                                  *nn.Lfm2VlVision
		h, w, rows, cols, tiles, last, tok int64
	}{
		{def, 256, 384, 1, 1, 1, 384, 98}, {def, 1000, 3000, 1, 3, 4, 972, 1017}, {def, 3000, 1000, 3, 1, 4, 972, 1017},
		{def, 512, 512, 1, 1, 1, 1024, 258}, {def, 513, 513, 1, 1, 1, 1024, 258}, {def, 720, 1280, 1, 2, 3, 1008, 769},
		{def, 1080, 1920, 2, 4, 9, 1008, 2311}, {def, 100, 100, 1, 1, 1, 256, 66}, {def, 64, 2000, 1, 1, 1, 496, 126},
		{def, 4000, 300, 10, 1, 11, 928, 2805}, {def, 768, 1024, 2, 3, 7, 936, 1779}, {def, 300, 300, 1, 1, 1, 324, 83},
		{def, 10, 10, 1, 1, 1, 256, 66}, {def, 1, 1, 1, 1, 1, 256, 66}, {def, 800, 800, 2, 2, 5, 1024, 1287},
		{def, 2048, 1536, 3, 2, 7, 936, 1779}, {def, 600, 900, 2, 3, 7, 988, 1792}, {def, 1200, 1200, 3, 3, 10, 1024, 2572},
		{def, 700, 710, 1, 1, 1, 960, 242}, {def, 1023, 1280, 2, 3, 7, 952, 1783},
		{&small, 1000, 3000, 1, 3, 3, 1024, 773}, {&small, 512, 512, 1, 1, 1, 484, 123}, {&small, 1080, 1920, 1, 2, 2, 1024, 516},
		{&small, 100, 100, 1, 1, 1, 144, 38}, {&small, 4000, 300, 4, 1, 4, 1024, 1030}, {&small, 700, 710, 2, 2, 4, 1024, 1030},
		{&small, 64, 2000, 1, 1, 1, 496, 126},
	} {
		im := tc.v.Image(tc.h, tc.w)
		l := im.Layout
		if l.Rows != tc.rows || l.Cols != tc.cols || int64(len(im.Patches)) != tc.tiles || im.Patches[len(im.Patches)-1] != tc.last || im.TextTokens != tc.tok {
			t.Errorf("%dx%d (thumbnail %v): %dx%d, %d tiles, the last %d patches, %d tokens; the processor %dx%d, %d, %d, %d",
				tc.h, tc.w, tc.v.Proc.Thumbnail, l.Rows, l.Cols, len(im.Patches), im.Patches[len(im.Patches)-1], im.TextTokens, tc.rows, tc.cols, tc.tiles, tc.last, tc.tok)
		}
	}
}

// What LFM2-VL's configs and processors may say that memsh cannot build
// is refused, naming the key.
func TestLFM2VLRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c map[string]any)
		proc string
		want string
	}{
		{"default patch", nil, "", "vision_config.patch_size (4) and downsample_factor (2) are not Lfm2VlImageProcessor's defaults"},
		{"pooling head", func(c map[string]any) { delete(visionConfig(c), "vision_use_head") }, "", `"vision_config.vision_use_head" is left out, and Siglip2VisionConfig's default (true) builds a pooling head`},
		{"pooling head on", func(c map[string]any) { visionConfig(c)["vision_use_head"] = true }, "", `"vision_config.vision_use_head" is true: the pooling head`},
		{"text model", func(c map[string]any) { textConfig(c)["model_type"] = "llama" }, "", `"text_config.model_type" must be "lfm2" or "lfm2_moe"`},
		{"tower", func(c map[string]any) { visionConfig(c)["model_type"] = "siglip_vision_model" }, "", `"vision_config.model_type" must be "siglip2_vision_model"`},
		{"grid", func(c map[string]any) { visionConfig(c)["num_patches"] = 15 }, "", `"vision_config.num_patches" (15) must be a square`},
		{"heads", func(c map[string]any) { visionConfig(c)["num_attention_heads"] = 3 }, "", `"vision_config.num_attention_heads" (3) must divide "vision_config.hidden_size"`},
		{"patch", nil, `{"encoder_patch_size": 8}`, `preprocessor_config.json: "encoder_patch_size" is 8: it must be vision_config's patch_size (4)`},
		{"factor", nil, `{"downsample_factor": 4}`, `"downsample_factor" is 4: it must be config.json's downsample_factor (2)`},
		{"tile", nil, `{"encoder_patch_size": 4, "tile_size": 36}`, `"tile_size" is 36: it must be a multiple of patch_size x downsample_factor (8)`},
		{"tokens", nil, `{"encoder_patch_size": 4, "tile_size": 32, "min_image_tokens": 20, "max_image_tokens": 16}`, `"max_image_tokens" (16) is less than min_image_tokens (20)`},
		{"tiles", nil, `{"encoder_patch_size": 4, "tile_size": 32, "min_tiles": 5, "max_tiles": 4}`, `"max_tiles" (4) is less than min_tiles (5)`},
		{"tolerance", nil, `{"encoder_patch_size": 4, "tile_size": 32, "max_pixels_tolerance": 0}`, `"max_pixels_tolerance" must be a positive number`},
		{"nested", nil, `{"image_processor": {"encoder_patch_size": 16}}`, `"image_processor.encoder_patch_size" is 16`},
	} {
		opts := hf.Options{Attn: "sdpa", Processor: lfm2VLProcessor("")}
		if tc.proc != "" {
			opts.Processor = []byte(tc.proc)
		}
		if tc.name == "default patch" {
			opts.Processor = nil
		}
		_, err := hf.FromConfigOptions(editConfig(t, "lfm2_vl-tiny.json", tc.edit), opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// The tiny LFM2-VL lowers as transformers names it, the same parameters
// with images or without; seq holds the images' tokens with their tags
// exactly, one less is refused naming the tiles; flash-attn over padded
// images is refused, over whole tiles (64 x 64: no padding) it runs.
func TestLFM2VLLowering(t *testing.T) {
	proc := lfm2VLProcessor(`, "min_tiles": 2, "max_tiles": 4`)
	m, err := hf.FromConfigOptions(readHF(t, "lfm2_vl-nonorm-tiny.json"), hf.Options{Attn: "sdpa", Processor: proc})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Seq = 128
	checkParamNames(t, p, []string{"model.language_model.embed_tokens.weight", "model.language_model.layers.1.self_attn.q_layernorm.weight",
		"model.language_model.embedding_norm.weight", "lm_head.weight", "model.vision_tower.embeddings.patch_embedding.bias",
		"model.vision_tower.embeddings.position_embedding.weight", "model.vision_tower.encoder.layers.1.self_attn.out_proj.bias",
		"model.vision_tower.encoder.layers.0.mlp.fc2.weight", "model.vision_tower.post_layernorm.bias",
		"model.multi_modal_projector.linear_1.bias", "model.multi_modal_projector.linear_2.weight"}, core.Images{Count: 1, Height: 50, Width: 70})
	// 2 images of 50 x 70: 2 x 2 tiles and a thumbnail, 83 tokens each
	p.Images = core.Images{Count: 2, Height: 50, Width: 70}
	for _, seq := range []int64{166, 165} {
		p.Seq = seq
		_, err := p.LowerProgram()
		if fits := seq == 166; fits != (err == nil) || !fits && !strings.Contains(err.Error(), "2 images of 50x70 pixels: 2x2 tiles of 32 pixels and a 24x32 thumbnail an image") {
			t.Errorf("seq=%d: error %v", seq, err)
		}
	}
	// 1 x 4000 pixels: 1 x 4 tiles and a thumbnail of 8 x 2,016 pixels,
	// 1,008 patches (smart_resize keeps each side at least 8; lfm2vl.py
	// --tokens gives the same): more than the 64 the images are padded to
	p.Images, p.Seq = core.Images{Count: 1, Height: 1, Width: 4000}, 4096
	if _, err := p.LowerProgram(); err == nil || !strings.Contains(err.Error(), "8x2016 pixels, 1008 patches, more than the 64 every image is padded to") {
		t.Errorf("1x4000: error %v", err)
	}
	m, err = hf.FromConfigOptions(readHF(t, "lfm2_vl-tiny.json"), hf.Options{Attn: "flash", Processor: proc})
	if err != nil {
		t.Fatal(err)
	}
	p = tinyPlan(t, m)
	p.Seq = 128
	for _, tc := range []struct {
		im   core.Images
		want string
	}{
		{core.Images{Count: 1, Height: 64, Width: 64}, ""},
		{core.Images{Count: 1, Height: 50, Width: 70}, "flash-attn over padded patches (transformers' unpadding) is not modelled"},
	} {
		p.Images = tc.im
		_, err := p.LowerProgram()
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("flash %v: error %v, want %q", tc.im, err, tc.want)
		}
	}
}

// LFM2-VL's images under hf_config(transformers=): 5.24.0 lowers as
// 5.25.0 does (its wheel has the same get_image_features and
// resize_positional_embeddings: the same saved bytes); 5.23.0 runs the
// projector on each image apart (TestLFM2VLBefore524ImagesSaveAsTransformers);
// 4.56 has no models/lfm2_vl.
func TestLFM2VLTransformersVersions(t *testing.T) {
	im := core.Images{Count: 1, Height: 50, Width: 70}
	proc := lfm2VLProcessor(`, "min_tiles": 2, "max_tiles": 4`)
	saved := map[string]int64{}
	for _, tc := range []struct {
		version string
		want    string
	}{
		{"5.25.0", ""},
		{"5.24.0", ""},
		{"5.23.0", ""},
		{"4.56.2", `model_type "lfm2_vl" needs transformers 4.57 or later`},
	} {
		m, err := hf.FromConfigOptions(readHF(t, "lfm2_vl-tiny.json"), hf.Options{Attn: "sdpa", Processor: proc, Transformers: tc.version})
		if err == nil {
			p := tinyPlan(t, m)
			p.Seq, p.Images = 128, im
			saved[tc.version] = evalPlan(t, p).SavedActivations
		}
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("transformers %s: error %v, want %q", tc.version, err, tc.want)
		}
	}
	if saved["5.25.0"] != saved["5.24.0"] || saved["5.23.0"] >= saved["5.24.0"] {
		t.Errorf("saved bytes by version %v: want 5.25.0's and 5.24.0's equal, 5.23.0's less (no gather, no padding slots)", saved)
	}
}
