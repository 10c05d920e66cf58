package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// peftAllLinear is one line of testdata/peft_all_linear.jsonl: what PEFT's
// LoRA adapts with target_modules="all-linear" on one config of each model
// class hf_config builds and Gemma 3's and Gemma 4's vision-language
// models (tools/oracle/peft_all_linear.py: peft 0.21.2,
// transformers 5.25.0, torch 2.15.0, on the meta device), or the error
// PEFT raises.
type peftAllLinear struct {
	Config, Arch string
	Trainable    int64
	Adapted      []string
	Error        string
}

// allLinearGaps are the model classes whose lora(targets=["all-linear"])
// memsh does not yet build as PEFT does, each with its trainable
// parameters less PEFT's on the tiny config (docs/peft.md, "Where
// all-linear differs"): the test holds each gap to its figure, so that
// a change either way is seen, and every other class to PEFT exactly.
var allLinearGaps = map[string]struct {
	gap int64  // memsh's trainable parameters less PEFT's
	why string // the modules one adapts and the other does not
}{
	"deepseek-v4-tiny.json":         {0, peftForwardFails},
	"falcon-h1-tiny.json":           {0, peftRefusesMamba},
	"falcon_mamba-tiny.json":        {0, peftRefusesMamba},
	"flops/mamba2-tiny.json":        {0, peftRefusesMamba},
	"mamba-tiny.json":               {0, peftRefusesMamba},
	"bert-tiny-hidden-dropout.json": {0, poolerRefused},
	"roberta-tiny-cls.json":         {0, poolerRefused},
	"modernbert-tiny-clscls.json":   {0, poolerRefused},
}

const (
	peftRefusesMamba = "PEFT refuses all-linear on Mamba models (out_proj and conv1d are incompatible with the Mamba kernels); so does memsh"
	poolerRefused    = "memsh refuses it: an adapter on the pooler's dense is not modelled (TestLoRATargetsAsPEFT)"
	peftForwardFails = "PEFT builds it, and its forward fails: lora.Linear's update on DeepSeek-V4's grouped o_a_proj (o_groups 2) cannot be added to the module's output; memsh refuses it (TestLoRADeepSeekV4AsPEFT)"
)

// TestLoRAAllLinearAsPEFT holds lora(targets=["all-linear"]), what memsh
// fit --lora and --qlora train, to PEFT's "all-linear" on every model
// class hf_config builds: the same modules adapted and the same trainable
// parameter count, but for allLinearGaps, whose gaps are held to their
// figures.
func TestLoRAAllLinearAsPEFT(t *testing.T) {
	cases := readJSONL[peftAllLinear](t, "peft_all_linear.jsonl")
	have := map[string]bool{}
	for _, c := range cases {
		have[c.Config] = true
	}
	for _, tr := range readJSONL[hfTree](t, "hf_names.jsonl") {
		if !have[tr.Config] {
			t.Errorf("peft_all_linear.jsonl has no line for %s (hf_names.py's CASES): run /work/venv-t/bin/python tools/oracle/peft_all_linear.py > sim/testdata/peft_all_linear.jsonl", tr.Config)
		}
	}
	processors := hfTestProcessors()
	for _, c := range cases {
		name := c.Config + " " + c.Arch
		m, err := hf.FromConfigOptions(readHF(t, c.Config), hf.Options{Attn: "sdpa", Arch: c.Arch, Processor: processors[c.Config]})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		prog, err := loraProgram(t, name, m, []string{"all-linear"}, nil)
		gap, known := allLinearGaps[c.Config]
		switch {
		case known && gap.why == poolerRefused:
			if err == nil || !strings.Contains(err.Error(), "pooler's dense is not modelled") {
				t.Errorf("%s: %v, want the pooler's refusal", name, err)
			}
			continue
		case known && gap.why == peftForwardFails:
			if err == nil || !strings.Contains(err.Error(), "its forward fails") || c.Error != "" {
				t.Errorf("%s: memsh %v, PEFT %q: %s", name, err, c.Error, gap.why)
			}
			continue
		case known && gap.why == peftRefusesMamba:
			if err == nil || !strings.Contains(err.Error(), "Mamba-based models") || c.Error == "" {
				t.Errorf("%s: memsh %v, PEFT %q: %s", name, err, c.Error, gap.why)
			}
			continue
		case err != nil && c.Error != "":
			continue // both refuse
		case err != nil:
			t.Errorf("%s: %v (PEFT adapts %d modules, %d trainable)", name, err, len(c.Adapted), c.Trainable)
			continue
		case c.Error != "":
			t.Errorf("%s: memsh adapts, PEFT refuses: %s", name, c.Error)
			continue
		}
		trainable, adapted := loraAdapted(prog)
		adapted, peftAdapted := wrapperOwners(adapted), wrapperOwners(c.Adapted)
		if known {
			if trainable-c.Trainable != gap.gap {
				t.Errorf("%s: %d trainable parameters, PEFT %d: %+d, where allLinearGaps says %+d (%s)", name, trainable, c.Trainable, trainable-c.Trainable, gap.gap, gap.why)
			}
			continue
		}
		if !slices.Equal(adapted, peftAdapted) {
			t.Errorf("%s: memsh adapts %d modules, PEFT %d: only memsh's %v, only PEFT's %v", name, len(adapted), len(peftAdapted),
				missingFrom(adapted, peftAdapted), missingFrom(peftAdapted, adapted))
		}
		if trainable != c.Trainable {
			t.Errorf("%s: %d trainable parameters, PEFT %d (%+d)", name, trainable, c.Trainable, trainable-c.Trainable)
		}
	}
}

// wrapperOwners names each adapted module by the module that owns it, as
// PEFT's and memsh's paths differ only there: PEFT's ParamWrapper over a
// 3-D experts module's two parameters is the module and its base_layer
// (mlp.experts, mlp.experts.base_layer), over a router's weight the
// router (mlp.gate); memsh names the parameters (mlp.experts.gate_up_proj,
// mlp.experts.down_proj, mlp.gate.weight). Sorted, each once.
func wrapperOwners(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		for strings.HasSuffix(p, ".base_layer") {
			p = strings.TrimSuffix(p, ".base_layer")
		}
		p = strings.TrimSuffix(p, ".weight")
		if i := strings.LastIndexByte(p, '.'); i > 0 && strings.HasSuffix(p[:i], ".experts") {
			p = p[:i]
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// missingFrom is what a holds that b does not, the first few.
func missingFrom(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	if len(out) > 4 {
		out = append(out[:4], "...")
	}
	return out
}

// PEFT refuses a LoRA target reaching a Mamba mixer's out_proj or conv1d
// on its Mamba model types (all-linear above); other names are adapted.
func TestLoRAMambaTargets(t *testing.T) {
	for _, tc := range []struct {
		config  string
		targets []string
		refused bool
	}{
		{"falcon_mamba-tiny.json", []string{"out_proj"}, true},
		{"falcon_mamba-tiny.json", []string{"in_proj", "mixer.conv1d"}, true},
		{"falcon_mamba-tiny.json", []string{"in_proj", "x_proj"}, false},
		{"falcon-h1-tiny.json", []string{"q_proj", "v_proj"}, false},
		{"bamba-tiny.json", []string{"all-linear"}, false}, // not one of PEFT's Mamba model types
	} {
		name := tc.config + " " + strings.Join(tc.targets, ",")
		m, err := hf.FromConfigOptions(readHF(t, tc.config), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = loraProgram(t, name, m, tc.targets, nil)
		if refused := err != nil && strings.Contains(err.Error(), "Mamba-based models"); refused != tc.refused || (err != nil && !refused) {
			t.Errorf("%s: %v, want refused %v", name, err, tc.refused)
		}
	}
}
