package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
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
// 775,940 and 1,330,948 (258,820 and 416,004). As Axolotl's qat: block
// swaps them (int8 activations, int4 weights: qat=int8-int4:32), fp32
// 1,495,812 and 2,584,324, bf16 1,428,228 and 2,434,820. Each linear keeps its
// fake-quantized input and weight (for F.linear) and, for each, clamp's
// fp32 input and two fp32 scale tensors (core/qat.go).
func TestQATSavesAsTorchao(t *testing.T) {
	for _, tc := range []struct {
		scheme, precision string
		want              [2]int64
	}{
		{"8da4w", "fp32", [2]int64{1_056_516, 1_840_900}},
		{"8da4w", "bf16", [2]int64{775_940, 1_330_948}},
		{"int8-int4", "fp32", [2]int64{1_495_812, 2_584_324}},
		{"int8-int4", "bf16", [2]int64{1_428_228, 2_434_820}},
	} {
		for i, want := range tc.want {
			p := hfSavedPlan(t, "llama-gqa-tiny.json", i+1, tc.precision, hf.Options{Attn: "sdpa"}, false)
			p.QAT = core.QAT{Scheme: tc.scheme, GroupSize: 32}
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s, %d layers: %d saved, want %d (%+d)", tc.scheme, tc.precision, i+1, got, want, got-want)
			}
		}
	}
}

// One fake-quantized linear's forward (in 512, out 256, 128 tokens,
// groupsize 256, no bias), against torchao 0.18.0 on PyTorch 2.15.0 (the
// CPU):
//
//	PYTHONPATH=<torchao 0.18.0 wheel unpacked> python tools/oracle/qat_linear.py 512 256 128 256 {float32,bfloat16} [frozen]
//	PYTHONPATH=<torchao 0.18.0 wheel unpacked> python tools/oracle/qat_linear.py 512 256 128 256 {float32,bfloat16} int8-int4
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
// and F.linear keeps the weight's fake-quantized copy only. Axolotl's
// int8-int4 (Int4WeightFakeQuantizer's weights, core/qat_int4.go) keeps
// the weight's fp32 copy (bf16; in fp32 the weight itself), its shifted
// and rounded copies and q - 8, and peaks at the zero point's add.
func TestQATLinearAsTorchao(t *testing.T) {
	for _, tc := range []struct {
		precision   string
		frozen      bool
		scheme      string
		peak, saved int64
	}{
		{"fp32", false, "8da4w", 2_629_120, 1_577_984},
		{"fp32", true, "8da4w", 2_102_784, 787_456},
		{"bf16", false, "8da4w", 2_235_904, 1_184_768},
		{"bf16", true, "8da4w", 1_709_568, 525_312},
		{"fp32", false, "int8-int4", 3_157_504, 2_630_656},
		{"bf16", false, "int8-int4", 3_550_720, 2_761_728},
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
		p.QAT = core.QAT{Scheme: tc.scheme, GroupSize: 256}
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
		name := tc.scheme + " " + tc.precision
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

// What qat= refuses, each with the reason in its words.
func TestQATRefusals(t *testing.T) {
	fp32, _ := core.LookupPrecision("fp32")
	mixed, _ := core.LookupPrecision("bf16-mixed")
	h100, err := hw.LookupDevice("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"nvfp4", func(p *core.Plan) { p.QAT.Scheme = "nvfp4" }, "NVFP4 fake quantization"},
		{"mxfp4", func(p *core.Plan) { p.QAT.Scheme = "mxfp4" }, "MXFP4 fake quantization"},
		{"weights only", func(p *core.Plan) { p.QAT.Scheme = "4w" }, "Int4WeightOnlyQATQuantizer"},
		{"unknown", func(p *core.Plan) { p.QAT.Scheme = "int3" }, `unknown qat scheme "int3"`},
		{"group", func(p *core.Plan) { p.QAT.GroupSize = 0 }, "qat_group_size must be positive"},
		{"autocast over fp32 weights", func(p *core.Plan) { p.Precision = mixed }, "under autocast with fp32 weights"},
		{"float8", func(p *core.Plan) { p.Float8.Scaling, p.Device = "tensorwise", h100 }, "qat= with float8="},
		{"quant", func(p *core.Plan) { p.Quant, p.LoRA = "nf4", &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"up"}} }, "qat= with quant="},
		{"compile", func(p *core.Plan) { p.Compile = core.Compile{Blocks: true} }, "Compile is not yet supported for QAT"},
		{"tp", func(p *core.Plan) { p.Parallel = core.Parallelism{TP: 2} }, "qat= with tensor parallelism"},
		{"chunked head", func(p *core.Plan) { p.LossChunks = 8 }, "on the output head with a chunked or fused loss"},
		{"chunked head, LoRA on it", func(p *core.Plan) {
			p.LossChunks, p.LoRA = 8, &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"lm_head"}}
		}, "on the output head with a chunked or fused loss"},
		{"int8-int4 with lora", func(p *core.Plan) {
			p.QAT.Scheme, p.LoRA = "int8-int4", &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"up"}}
		}, `qat="int8-int4" with lora= is not modelled`},
		{"int8-int4 group not dividing", func(p *core.Plan) { p.QAT.Scheme, p.QAT.GroupSize = "int8-int4", 512 }, "in_features 256 is not a multiple of qat_group_size 512"},
		{"head without qat", func(p *core.Plan) { p.QAT = core.QAT{NoHead: true} }, "qat_head=False needs qat="},
	} {
		p := tinyPlan(t, tinyLM())
		p.Precision = fp32
		p.QAT = core.QAT{Scheme: "8da4w", GroupSize: 256}
		tc.edit(p)
		err := p.Validate()
		if err == nil {
			_, err = p.LowerProgram()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// Which linears are swapped: those whose in_features the group size
// divides (tinyLM's up, 256 in, at 256; not down, 512 in, at 384 ...),
// the head unless qat_head=False, and under LoRA the adapted ones only
// (torchtune's swap_lora_linear_with_qat).
func TestQATSwapsAsTorchao(t *testing.T) {
	for _, tc := range []struct {
		name  string
		group int64
		head  bool
		lora  []string
		want  []string
	}{
		{"all", 256, true, nil, []string{"up", "down", "lm_head"}},
		{"group 512", 512, true, nil, []string{"down"}},
		{"no head", 256, false, nil, []string{"up", "down"}},
		{"lora on up", 256, true, []string{"up"}, []string{"up"}},
	} {
		p := tinyPlan(t, tinyLM())
		p.QAT = core.QAT{Scheme: "8da4w", GroupSize: tc.group, NoHead: !tc.head}
		if tc.lora != nil {
			p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: tc.lora}
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, op := range prog.Ops {
			if op.Kind == "clamp" && strings.HasSuffix(op.Name, ".weight_fake_quantizer.q") {
				got = append(got, strings.TrimSuffix(op.Name, ".weight_fake_quantizer.q"))
			}
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: fake-quantized %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A chunked loss is fine when the head is not swapped: qat_head=False,
// or LoRA (torchtune's QAT-LoRA) not on the output.
func TestQATChunkedLossHeadPlain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		noHead bool
		lora   *core.LoRA
	}{
		{"qat_head=False", true, nil},
		{"LoRA on up", false, &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"up"}}},
	} {
		p := tinyPlan(t, tinyLM())
		p.LossChunks, p.LoRA = 8, tc.lora
		p.QAT = core.QAT{Scheme: "8da4w", GroupSize: 256, NoHead: tc.noHead}
		if _, err := p.LowerProgram(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
