package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// Gemma3ForConditionalGeneration's parameter counts. The hub's totals:
// 4B 4,300,079,472, 12B 12,187,325,040, 27B 27,432,406,640 (what
// sum(p.numel() for p in model.parameters()) gives for google/gemma-3-*-it
// loaded whole, as public loaders' checks and model lists quote them; the
// hub itself is not reachable from here). transformers 5.25.0 counts the
// same on the meta device for these config.json files
// (tools/oracle/gemma3vl.py CONFIG --params), its SigLIP tower 416,866,032
// in all three (27 layers of 1152, images of 896, patches of 14) and its
// projector 1152 x (1 + the text width). gemma3-vl-tiny.json is the tiny
// one of TestGemma3VisionSavesAsTransformers.
func TestGemma3ConditionalParams(t *testing.T) {
	for _, tc := range []struct {
		file             string
		total, tower, mm int64
	}{
		{"gemma-3-4b-it.json", 4_300_079_472, 416_866_032, 2_950_272},
		{"gemma-3-12b-it.json", 12_187_325_040, 416_866_032, 4_424_832},
		{"gemma-3-27b-it.json", 27_432_406_640, 416_866_032, 6_194_304},
		{"gemma3-vl-tiny.json", 194_048, 26_912, 2_080},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if got := m.Params(); got != tc.total {
			t.Errorf("%s: %d parameters, transformers %d", tc.file, got, tc.total)
		}
		var v *nn.Gemma3Vision
		for _, l := range m.Layers {
			core.Walk(l, "", func(_ string, x core.Layer) {
				if x, ok := x.(*nn.Gemma3Vision); ok {
					v = x
				}
			})
		}
		if v == nil {
			t.Errorf("%s: no vision tower", tc.file)
			continue
		}
		if got := v.Params() - v.ProjectorParams(); got != tc.tower {
			t.Errorf("%s: vision tower %d, transformers %d", tc.file, got, tc.tower)
		}
		if got := v.ProjectorParams(); got != tc.mm {
			t.Errorf("%s: projector %d, transformers %d", tc.file, got, tc.mm)
		}
	}
}

// What the images add to the storages autograd saves in the tiny Gemma 3
// (sim/testdata/hf/gemma3-vl-tiny.json: a 2-layer SigLIP tower 32 wide, 2
// heads, images of 64 pixels in patches of 4, 16 x 16 patches averaged
// into 16 soft tokens; a 4-layer text model 64 wide, 4 heads of 16 and 2
// kv heads, sliding and full layers alternating, a window of 16), trained
// on 64 tokens with the cpu runtime: the step with the images minus the
// same step with text tokens in their place, as tools/oracle/gemma3vl.py
// measures it (transformers 5.25.0, torch 2.15.0, on the CPU; parameters
// and buffers excluded):
//
//	/work/venv-t/bin/python gemma3vl.py ../../sim/testdata/hf/gemma3-vl-tiny.json 2 64 [bf16] [eager]
//	/work/venv-t/bin/python gemma3vl.py ../../sim/testdata/hf/gemma3-vl-tiny.json 1 64
//	/work/venv-t/bin/python gemma3vl.py ../../sim/testdata/hf/gemma3-vl-tiny.json 3 64
//	/work/venv-t/bin/python gemma3vl.py ../../sim/testdata/hf/gemma3-vl-tiny.json 2 40
//
// The figures are the images (fp32; in bf16 their copy the convolution
// saves), per layer the LayerNorms' inputs and statistics, q, k, v, the
// kernel's output and logsumexp (eager: its fp32 probabilities and their
// cast), the MLP's fc1 input, GELU input and fc2 input; the patch grid
// avg_pool2d saves, the projector's RMSNorm (its input, rsqrt, 1 +
// weight, the normalised rows) and the matmul's contiguous copy; the
// placeholder mask. With the token_type_ids every text layer gets a mask
// under SDPA: its additive bias [1, 1, 64, 64] and k and v expanded to
// the 4 heads in the full layers too (the sliding ones have both anyway at
// 64 tokens); eager keeps the same either way.
func TestGemma3VisionSavesAsTransformers(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		count     int64
		want      int64
		precision string
		attn      string
		seq       int64
	}{
		{2, 1_909_056, "", "", 64},
		{1, 987_392, "", "", 64},
		{3, 2_830_720, "", "", 64},
		{2, 1_876_776, "", "", 40},
		{2, 962_880, "bf16", "", 64},
		{2, 3_932_480, "", "eager", 64},
		{2, 4_067_648, "bf16", "eager", 64},
	} {
		if tc.attn == "" {
			tc.attn = "sdpa"
		}
		m, err := hf.FromConfigOptions(readHF(t, "gemma3-vl-tiny.json"), hf.Options{Attn: tc.attn})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Seq = cpu, tc.seq
		if tc.precision == "" {
			tc.precision = "fp32"
		}
		p.Precision, err = core.LookupPrecision(tc.precision)
		if err != nil {
			t.Fatal(err)
		}
		p.Images = core.Images{Count: tc.count, Height: 512, Width: 384}
		with := evalPlan(t, p).SavedActivations
		p.Images = core.Images{}
		without := evalPlan(t, p).SavedActivations
		if got := with - without; got != tc.want {
			t.Errorf("%d images %s %s: the images add %d saved bytes, transformers %d (%+.2f %%)", tc.count, tc.precision, tc.attn, got, tc.want, 100*float64(got-tc.want)/float64(tc.want))
		}
	}
}

// The classes a gemma3 config.json builds: Gemma3Model holds the tower
// too (4,300,079,472 parameters for the 4B: the head is tied), and
// Gemma3ForCausalLM is the text model alone, named model.layers..., as
// Gemma3ForCausalLM.from_pretrained builds it from the checkpoint's
// text_config (3,880,263,168; transformers 5.25.0 on the meta device).
func TestGemma3Classes(t *testing.T) {
	for arch, want := range map[string]int64{"Gemma3ForConditionalGeneration": 4_300_079_472, "Gemma3Model": 4_300_079_472, "Gemma3ForCausalLM": 3_880_263_168} {
		m, err := hf.FromConfigArch(readHF(t, "gemma-3-4b-it.json"), "sdpa", arch)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		if got := m.Params(); got != want {
			t.Errorf("%s: %d parameters, transformers %d", arch, got, want)
		}
		tower := false
		for _, l := range m.Layers {
			core.Walk(l, "", func(_ string, x core.Layer) { _, ok := x.(*nn.Gemma3Vision); tower = tower || ok })
		}
		if tower != (arch != "Gemma3ForCausalLM") {
			t.Errorf("%s: vision tower %v", arch, tower)
		}
		prog, err := tinyPlan(t, m).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"Gemma3ForConditionalGeneration": "model.language_model.embed_tokens.weight",
			"Gemma3Model": "language_model.embed_tokens.weight", "Gemma3ForCausalLM": "model.embed_tokens.weight"}[arch]
		if got := prog.Params[0].Name; got != want {
			t.Errorf("%s: the first parameter is %s, transformers' %s", arch, got, want)
		}
	}
}

// Gemma 3 inputs memsh refuses, each naming what to change: SigLIP's
// pooling head (vision_use_head, SiglipVisionConfig's default true), the
// flash-attention kernel transformers' Gemma3Model refuses, tensor
// parallelism over the tower, and more image tokens than seq.
func TestGemma3VisionRefusals(t *testing.T) {
	tiny := string(readHF(t, "gemma3-vl-tiny.json"))
	for _, tc := range []struct {
		name, config, attn string
		tp, images         int64
		want               string
	}{
		{"pooling head", strings.Replace(tiny, `"vision_use_head": false`, `"vision_use_head": true`, 1), "sdpa", 1, 0, `"vision_config.vision_use_head" is true`},
		{"pooling head by default", strings.Replace(tiny, `"vision_use_head": false`, `"num_channels": 3`, 1), "sdpa", 1, 0, `"vision_config.vision_use_head" is true`},
		{"flash", tiny, "flash", 1, 0, "flash"},
		{"tp", tiny, "sdpa", 2, 1, "data parallelism only"},
		{"images past seq", tiny, "sdpa", 1, 4, "4 images (Gemma3ImageProcessor resizes every image to 64x64 pixels): 16 image tokens an image, 64 a sample, more than seq=32"},
	} {
		m, err := hf.FromConfigOptions([]byte(tc.config), hf.Options{Attn: tc.attn})
		if err == nil {
			p := tinyPlan(t, m)
			p.Seq = 32
			p.Images = core.Images{Count: tc.images, Height: 100, Width: 100}
			p.Parallel = core.Parallelism{TP: tc.tp}
			p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: tc.tp}
			_, err = Evaluate(p, core.Options{})
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}
