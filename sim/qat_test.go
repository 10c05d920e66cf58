package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// What a tiny Llama keeps for backward under torchao's
// Int8DynActInt4WeightQATQuantizer (groupsize 32: every linear of
// llama-gqa-tiny.json, lm_head included, has in_features 64 or 128),
// against torchao 0.18.0 on PyTorch 2.15.0 and transformers 5.25.0 (the
// CPU, no autocast), 2 samples of 32 tokens:
//
//	PYTHONPATH=<torchao 0.18.0 wheel unpacked> python tools/oracle/hf_block_saved.py sim/testdata/hf/llama-gqa-tiny.json {1,2} 2 32 {float32,bfloat16} sdpa nocache qat=32
//
// fp32 1,056,516 and 1,840,900 (400,132 and 680,196 without qat=); bf16
// 775,940 and 1,330,948 (258,820 and 416,004). Each linear keeps its
// fake-quantized input and weight (for F.linear) and, for each, clamp's
// fp32 input and two fp32 scale tensors (core/qat.go).
func TestQATSavesAsTorchao(t *testing.T) {
	for _, tc := range []struct {
		precision string
		want      [2]int64
	}{
		{"fp32", [2]int64{1_056_516, 1_840_900}},
		{"bf16", [2]int64{775_940, 1_330_948}},
	} {
		for i, want := range tc.want {
			p := hfSavedPlan(t, "llama-gqa-tiny.json", i+1, tc.precision, hf.Options{Attn: "sdpa"}, false)
			p.QAT = core.QAT{Scheme: "8da4w", GroupSize: 32}
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s, %d layers: %d saved, want %d (%+d)", tc.precision, i+1, got, want, got-want)
			}
		}
	}
}

// One fake-quantized linear's forward (in 512, out 256, 128 tokens,
// groupsize 256, no bias), against torchao 0.18.0 on PyTorch 2.15.0 (the
// CPU):
//
//	PYTHONPATH=<torchao 0.18.0 wheel unpacked> python tools/oracle/qat_linear.py 512 256 128 256 {float32,bfloat16} [frozen]
//
// forward_peak is the most the storages the forward makes (neither the
// input nor the weight) hold at once: in the weight's chain, at its
// sub (fp32: clamp's input, q, q's copy and its centred copy, 4 x 4n of
// the weight's n = 131,072 elements) or its scale product (bf16: 4n +
// 4n + 2n + 4n), over the input's saved fp32 clamp input and its
// fake-quantized copy and the scales (all fp32, 512 B a quantizer for
// the 128 tokens, 2,048 B for the weight's 256 x 2 groups); saved is
// what autograd keeps. A frozen weight (torchtune's QATLoRALinear base)
// is fake-quantized without autograd: nothing of its chain is saved,
// and F.linear keeps the weight's fake-quantized copy only.
func TestQATLinearAsTorchao(t *testing.T) {
	for _, tc := range []struct {
		precision   string
		frozen      bool
		peak, saved int64
	}{
		{"fp32", false, 2_629_120, 1_577_984},
		{"fp32", true, 2_102_784, 787_456},
		{"bf16", false, 2_235_904, 1_184_768},
		{"bf16", true, 1_709_568, 525_312},
	} {
		m := &core.Model{Name: "one", Vocab: 1000, Loss: "mse", Layers: []core.Layer{
			&nn.Embedding{Name: "embed", Rows: 1000, Dim: 512},
			&nn.Linear{Name: "lin", In: 512, Out: 256, Role: core.RoleLinear},
		}}
		p := tinyPlan(t, m)
		p.Seq = 128
		var err error
		if p.Precision, err = core.LookupPrecision(tc.precision); err != nil {
			t.Fatal(err)
		}
		if p.Runtime, err = core.LookupRuntime("cpu"); err != nil {
			t.Fatal(err)
		}
		p.QAT = core.QAT{Scheme: "8da4w", GroupSize: 256}
		if tc.frozen {
			p.Freeze = []string{"lin"}
		}
		rep, err := Evaluate(p, core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		base, peak := int64(-1), int64(0)
		for i, pt := range rep.Timeline {
			if pt.Phase != replay.PhaseForward || !strings.HasPrefix(pt.Op, "lin") {
				continue
			}
			if base < 0 {
				base = rep.Timeline[i-1].Allocated
			}
			peak = max(peak, pt.Allocated)
		}
		name := tc.precision
		if tc.frozen {
			name += " frozen"
		}
		// The harness's caller holds the input; memsh frees it after
		// the activation's product, its last use: 128 x 512 elements.
		input := int64(128 * 512 * 4)
		if tc.precision == "bf16" {
			input /= 2
		}
		if got := peak - base + input; got != tc.peak {
			t.Errorf("%s: forward peak %d above its input (the input held), want %d (%+d)", name, got, tc.peak, got-tc.peak)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		seen, saved := map[core.Value]bool{}, int64(0)
		for _, op := range prog.Ops {
			if !strings.HasPrefix(op.Name, "lin") {
				continue
			}
			for _, v := range op.Saved {
				if !seen[v] {
					seen[v], saved = true, saved+prog.Values[v].Bytes
				}
			}
		}
		if saved != tc.saved {
			t.Errorf("%s: %d saved, want %d (%+d)", name, saved, tc.saved, saved-tc.saved)
		}
	}
}
