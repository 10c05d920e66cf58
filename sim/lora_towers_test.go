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
