package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// PEFT's all-linear reaches the vision towers' and projectors' nn.Linear
// modules too. A step with images runs them with their adapters; one
// without registers the tower's weights and its adapters, which get no
// gradient (nn's idleParam). Each vision-language class of
// testdata/peft_all_linear.jsonl, with one 224 x 224 image a sample, is
// held to PEFT's adapted modules and trainable count as
// TestLoRAAllLinearAsPEFT holds it without images (the same gaps).
func TestLoRAAllLinearWithImagesAsPEFT(t *testing.T) {
	processors := hfTestProcessors()
	n := 0
	for _, c := range readJSONL[peftAllLinear](t, "peft_all_linear.jsonl") {
		if !slices.ContainsFunc(c.Adapted, func(a string) bool {
			return strings.Contains(a, "vision") || strings.Contains(a, "visual") || strings.Contains(a, "projector")
		}) {
			continue
		}
		n++
		name := c.Config + " " + c.Arch
		m, err := hf.FromConfigOptions(readHF(t, c.Config), hf.Options{Attn: "sdpa", Arch: c.Arch, Processor: processors[c.Config]})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p := tinyPlan(t, m)
		p.Seq, p.Images = 512, core.Images{Count: 1, Height: 224, Width: 224}
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		trainable, adapted := loraAdapted(prog)
		if gap, known := allLinearGaps[c.Config]; known {
			if trainable-c.Trainable != gap.gap {
				t.Errorf("%s with images: %d trainable parameters, PEFT %d: %+d, where allLinearGaps says %+d", name, trainable, c.Trainable, trainable-c.Trainable, gap.gap)
			}
			continue
		}
		if adapted, peft := wrapperOwners(adapted), wrapperOwners(c.Adapted); !slices.Equal(adapted, peft) {
			t.Errorf("%s with images: only memsh's %v, only PEFT's %v", name, missingFrom(adapted, peft), missingFrom(peft, adapted))
		}
		if trainable != c.Trainable {
			t.Errorf("%s with images: %d trainable parameters, PEFT %d", name, trainable, c.Trainable)
		}
	}
	if n < 20 {
		t.Errorf("%d vision-language classes in peft_all_linear.jsonl, want at least the 20 it held in session 37", n)
	}
}

// Without images the towers' adapters get no gradient and keep nothing:
// qwen2-vl-tiny.json (its text model cut to 2 layers) under PEFT's
// all-linear, 2 samples of 32 tokens, fp32, transformers 5.25.0, peft
// 0.21.2, PyTorch 2.15.0 on the CPU:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/qwen2-vl-tiny.json 2 2 32 float32 sdpa nocache lora=all-linear
//
// saved 594,436 bytes, parameters 744,448 (the tower's adapters
// included), gradients 32,768 (the text model's 8,192 adapter weights
// alone).
func TestLoRAIdleTowerAsPEFT(t *testing.T) {
	p := hfOraclePlan(t, ropeConfig(t, "qwen2-vl-tiny.json", 2, nil), hf.Options{Attn: "sdpa"}, "fp32")
	p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
	r := evalPlan(t, p)
	if got := [3]int64{r.SavedActivations, r.States.Params, r.States.Grads}; got != [3]int64{594436, 744448, 32768} {
		t.Errorf("saved, parameters and gradients %v bytes, PEFT [594436 744448 32768]", got)
	}
	if want := 2 * int64(32768); r.States.Optimizer != want {
		t.Errorf("%d bytes of AdamW state, want %d (two fp32 moments of the adapters that get a gradient)", r.States.Optimizer, want)
	}
}

// What the images add to what autograd keeps under PEFT's LoRA all-linear
// (r=4, alpha=8, fp32 adapters on every linear, the towers' and
// projectors' too; the base frozen, so the tower's first layers need no
// gradient until an adapter's output does): the step with the images
// minus the same step with text tokens in their place, as the towers'
// oracles measure it with lora (tools/oracle/vl_harness.py; transformers
// 5.25.0, peft 0.21.2, torch 2.15.0, on the CPU):
//
//	/work/venv-t/bin/python lfm2vl.py ../../sim/testdata/hf/lfm2_vl-tiny.json {1 50 70 128,1 20 20 64,2 100 30 256} [bf16] lora proc=proc-tiny.json
//	/work/venv-t/bin/python mistral3vl.py ../../sim/testdata/hf/mistral3-tiny.json 2 84 112 96 lora
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/idefics3-tiny.json 1 50 70 128 lora
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2-vl-tiny.json {1 56 56 32,2 112 168 64} [bf16] lora
//	/work/venv-t/bin/python glm4v.py ../../sim/testdata/hf/{glm4v-tiny,glm4v-moe-tiny}.json 2 112 168 64 lora
//	/work/venv-t/bin/python qwen2vl.py ../../sim/testdata/hf/qwen2.5-vl-tiny.json 2 112 168 64 lora
//	/work/venv-t/bin/python internvl.py ../../sim/testdata/hf/internvl-tiny.json 2 56 112 64 lora
//	/work/venv-t/bin/python idefics3.py ../../sim/testdata/hf/smolvlm-tiny.json 1 50 70 128 lora
//	/work/venv-t/bin/python llava_next.py ../../sim/testdata/hf/llava-next-tiny.json 1 112 112 128 lora
//	/work/venv-t/bin/python llava_next.py ../../sim/testdata/hf/llava-onevision-tiny.json 1 240 240 256 lora
//	/work/venv-t/bin/python qwen3vl.py ../../sim/testdata/hf/qwen3-vl-tiny.json 2 96 128 64 lora
//
// (proc-tiny.json as TestLFM2VLImagesSaveAsTransformers writes it.)
// LFM2-VL's include Siglip2's patch_embedding, an nn.Linear and so
// adapted; the rope tables every block keeps are held with the first op
// of the blocks that has a backward where the op before the blocks has
// none (nn's saveRopeTables: Qwen2-VL's, GLM-4V's); GLM-4V's downsample, a
// Conv2d over the blocks' output, keeps its input under a frozen weight
// (core.Builder.Linear on RoleConv).
func TestLoRATowersImagesSaveAsPEFT(t *testing.T) {
	lfm2 := hf.Options{Attn: "sdpa", Processor: lfm2VLProcessor(`, "min_tiles": 2, "max_tiles": 4`)}
	sdpa := hf.Options{Attn: "sdpa"}
	for _, tc := range []struct {
		config    string
		opts      hf.Options
		params    int64
		im        core.Images
		seq       int64
		precision string
		want      int64
	}{
		{"lfm2_vl-tiny.json", lfm2, 238_576, core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", 1_485_648},
		{"lfm2_vl-tiny.json", lfm2, 238_576, core.Images{Count: 1, Height: 50, Width: 70}, 128, "bf16", 1_266_448},
		{"lfm2_vl-tiny.json", lfm2, 238_576, core.Images{Count: 1, Height: 20, Width: 20}, 64, "fp32", 307_152},
		{"lfm2_vl-tiny.json", lfm2, 238_576, core.Images{Count: 1, Height: 20, Width: 20}, 64, "bf16", 263_312},
		{"lfm2_vl-tiny.json", lfm2, 238_576, core.Images{Count: 2, Height: 100, Width: 30}, 256, "fp32", 2_390_400},
		{"lfm2_vl-tiny.json", lfm2, 238_576, core.Images{Count: 2, Height: 100, Width: 30}, 256, "bf16", 2_039_680},
		{"mistral3-tiny.json", sdpa, 254_848, core.Images{Count: 2, Height: 84, Width: 112}, 96, "fp32", 516_192},
		{"idefics3-tiny.json", sdpa, 144_480, core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", 749_760},
		{"qwen2-vl-tiny.json", sdpa, 173_056, core.Images{Count: 1, Height: 56, Width: 56}, 32, "fp32", 89_120},
		{"qwen2-vl-tiny.json", sdpa, 173_056, core.Images{Count: 1, Height: 56, Width: 56}, 32, "bf16", 63_264},
		{"qwen2-vl-tiny.json", sdpa, 173_056, core.Images{Count: 2, Height: 112, Width: 168}, 64, "fp32", 985_920},
		{"qwen2-vl-tiny.json", sdpa, 173_056, core.Images{Count: 2, Height: 112, Width: 168}, 64, "bf16", 675_648},
		{"glm4v-tiny.json", sdpa, 203_808, core.Images{Count: 2, Height: 112, Width: 168}, 64, "fp32", 1_611_456},
		{"glm4v-moe-tiny.json", sdpa, 209_952, core.Images{Count: 2, Height: 112, Width: 168}, 64, "fp32", 2_295_744},
		{"qwen2.5-vl-tiny.json", hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 198_304, core.Images{Count: 2, Height: 112, Width: 168}, 64, "fp32", 2_058_432},
		{"internvl-tiny.json", sdpa, 254_688, core.Images{Count: 2, Height: 56, Width: 112}, 64, "fp32", 380_112},
		{"smolvlm-tiny.json", sdpa, 170_592, core.Images{Count: 1, Height: 50, Width: 70}, 128, "fp32", 2_896_320},
		{"llava-next-tiny.json", sdpa, 256_608, core.Images{Count: 1, Height: 112, Width: 112}, 128, "fp32", 402_008},
		{"llava-onevision-tiny.json", sdpa, 256_768, core.Images{Count: 1, Height: 240, Width: 240}, 256, "fp32", 1_570_432},
		{"qwen3-vl-tiny.json", hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, 290_624, core.Images{Count: 2, Height: 96, Width: 128}, 64, "fp32", 913_344},
	} {
		p := visionPlan(t, tc.config, tc.opts, tc.params, tc.precision)
		p.Seq = tc.seq
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
		checkImagesSave(t, tc.config+" "+tc.precision, p, tc.im, tc.want)
	}
}

// Gemma 3's tower under LoRA, as TestGemma3VisionSavesAsTransformers lays
// it out (2 images of 512 x 384 pixels, 64 tokens, fp32, the CPU
// runtime): what the images add,
//
//	/work/venv-t/bin/python gemma3vl.py ../../sim/testdata/hf/gemma3-vl-tiny.json 2 64 lora
//
// 1,848,128 bytes (transformers 5.25.0, peft 0.21.2, torch 2.15.0).
func TestLoRAGemma3TowerImagesSaveAsPEFT(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfigOptions(readHF(t, "gemma3-vl-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.Runtime, p.Seq = cpu, 64
	if p.Precision, err = core.LookupPrecision("fp32"); err != nil {
		t.Fatal(err)
	}
	p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
	checkImagesSave(t, "gemma3-vl-tiny.json fp32", p, core.Images{Count: 2, Height: 512, Width: 384}, 1_848_128)
}
