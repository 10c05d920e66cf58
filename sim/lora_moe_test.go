package sim

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/timing"
)

// peftMoETargets is one line of testdata/peft_moe_targets.jsonl: what
// PEFT's get_peft_model(model, LoraConfig(r=4, lora_alpha=8,
// target_modules=Targets)) adapts in a tiny transformers MoE model built
// with 3-D experts (tools/oracle/peft_moe_targets.py: peft 0.21.2,
// transformers 5.25.0, torch 2.15.0, on the meta device). Adapters maps
// each adapted module (lora.Linear) or parameter (ParamWrapper: the
// experts' gate_up_proj and down_proj, a router's weight) to the shapes
// of its lora_A and lora_B weights; Error is PEFT's refusal.
type peftMoETargets struct {
	Config, Arch string
	Targets      any
	Params       []string // target_parameters
	Trainable    int64
	Adapters     map[string][2][]int64
	Error        string
}

// transposedExperts: PEFT 0.21.2 reads transformers 4.57.1's gpt-oss
// experts, stored [E, in, out] without the is_transposed attribute 5.x
// gives them, as [E, out, in] (ParamWrapper.update_layer swaps in and
// out): its lora_A is [E x r, out], its lora_B [in, E x r], the same
// parameters as memsh's (5.x's) orientation, transposed.
func transposedExperts(transformers, config string) bool {
	return transformers == "4.57.1" && config == "gpt_oss-tiny.json"
}

// wrapsAny reports whether PEFT wrapped a parameter c's target_parameters
// name.
func wrapsAny(c peftMoETargets) bool {
	for m := range c.Adapters {
		for _, p := range c.Params {
			if strings.HasSuffix(m, "."+p) {
				return true
			}
		}
	}
	return false
}

func (c *peftMoETargets) targets() []string {
	return (&peftTargets{Targets: c.Targets}).targets()
}

// TestLoRAMoETargetsAsPEFT holds lora(targets=) on the MoE families to
// what PEFT 0.21.2 adapts there: the same modules and parameters, the
// same adapter shapes (a ParamWrapper's lora_A is [experts x rank, in],
// its lora_B [out, experts x rank], the fused gate_up_proj at twice the
// rank), the same trainable count, and PEFT's refusals. Under
// transformers 5.25.0 the experts are 3-D parameters and PEFT converts
// the targets (core's lora_experts.go); under 4.57.1
// (peft_moe_targets_457.jsonl, the same cases on the model types 4.57.1
// has) they are nn.Linear modules PEFT adapts one by one.
func TestLoRAMoETargetsAsPEFT(t *testing.T) {
	for _, run := range []struct {
		file, transformers string
		cases              int
	}{
		{"peft_moe_targets.jsonl", "5.25.0", 92},
		{"peft_moe_targets_457.jsonl", "4.57.1", 84},
	} {
		cases := readJSONL[peftMoETargets](t, run.file)
		if len(cases) != run.cases {
			t.Fatalf("%d cases in testdata/%s, want the %d peft_moe_targets.py writes", len(cases), run.file, run.cases)
		}
		for _, c := range cases {
			checkLoRAMoETargets(t, c, run.transformers)
		}
	}
}

func checkLoRAMoETargets(t *testing.T, c peftMoETargets, transformers string) {
	t.Helper()
	targets := c.targets()
	name := transformers + " " + c.Config + " " + strings.Join(targets, ",") + " " + strings.Join(c.Params, ",")
	if transformers == "4.57.1" && c.Config == "granitemoe-tiny.json" && len(c.Params) > 0 {
		return // 4.x's ParallelExperts are input_linear and output_linear, which memsh names as 5.x does (gate_up_proj)
	}
	m, err := hf.FromConfigOptions(readHF(t, c.Config), hf.Options{Attn: "sdpa", Transformers: transformers})
	if err != nil && strings.Contains(err.Error(), "needs transformers") {
		return // a family memsh builds from a later release only (LongCat-Flash: 5.25)
	}
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	prog, err := loraProgram(t, name, m, targets, c.Params)
	if err != nil && len(c.Params) > 0 && strings.Contains(err.Error(), "target_parameters") && !wrapsAny(c) {
		return // PEFT warns that no parameter matched; memsh refuses
	}
	if c.Error != "" {
		if err == nil {
			t.Errorf("%s: lowered, PEFT refuses: %s", name, c.Error)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %v (PEFT adapts %v)", name, err, slices.Sorted(maps.Keys(c.Adapters)))
		return
	}
	var trainable int64
	got := map[string][2][]int64{}
	for _, q := range prog.Params {
		if q.Trainable {
			trainable += q.FullNumel
		}
		for i, ab := range []string{".lora.lora_A.weight", ".lora.lora_B.weight"} {
			if m, ok := strings.CutSuffix(q.Name, ab); ok {
				s := got[m]
				s[i] = q.Shape
				got[m] = s
			}
		}
	}
	for _, m := range slices.Sorted(maps.Keys(c.Adapters)) {
		w := c.Adapters[m]
		g, ok := got[m]
		switch {
		case !ok:
			t.Errorf("%s: PEFT adapts %s (lora_A %v, lora_B %v), memsh does not", name, m, w[0], w[1])
		case transposedExperts(transformers, c.Config) && slices.Equal(g[0], []int64{w[0][0], w[1][0]}) && slices.Equal(g[1], []int64{w[0][1], w[1][1]}):
		case !slices.Equal(g[0], w[0]) || !slices.Equal(g[1], w[1]):
			t.Errorf("%s: %s: lora_A %v lora_B %v, PEFT %v %v", name, m, g[0], g[1], w[0], w[1])
		}
	}
	for _, m := range slices.Sorted(maps.Keys(got)) {
		if _, ok := c.Adapters[m]; !ok {
			t.Errorf("%s: memsh adapts %s, PEFT does not", name, m)
		}
	}
	if trainable != c.Trainable {
		t.Errorf("%s: %d trainable parameters, PEFT %d", name, trainable, c.Trainable)
	}
}

// What a Qwen3-MoE keeps for backward under PEFT's LoRA on all-linear
// (r=4, alpha=8, fp32 adapters over bf16 weights), against transformers
// 5.25.0, peft 0.21.2 and PyTorch 2.15.0 on the CPU (qwen3_moe-tiny.json:
// 64 wide, 4 experts of 32, top 2), 2 samples of 32 tokens, 1 and 2
// layers, the experts run by grouped_mm (the default) and eager:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/qwen3_moe-tiny.json {1,2} 2 32 bfloat16 sdpa nocache lora=all-linear [eagerexperts]
//
// Full fine-tuning keeps 269,844 and 470,820 bytes (grouped_mm), 334,340
// and 599,812 (eager); with the adapters a layer keeps what PEFT's
// ParamWrapper adds: the merged weights W + B A of gate_up_proj and
// down_proj ([4, 64, 64] and [4, 64, 32] bf16), which the expert GEMMs
// save with their inputs, and baddbmm's bf16 copies of the adapters; the
// router's merged weight; the attention's lora.Linear layers their fp32
// copies of the inputs. LoRA on q_proj alone keeps 154,624 bytes less at
// one eager layer: what the wrapped experts and router add.
func TestLoRAMoESavedAsPEFT(t *testing.T) {
	for _, tc := range []struct {
		experts  string
		one, two int64
	}{
		{"grouped_mm", 330004, 624676},
		{"eager", 345348, 655364},
	} {
		for i, want := range []int64{tc.one, tc.two} {
			p := hfSavedPlan(t, "qwen3_moe-tiny.json", i+1, "bf16", hf.Options{Attn: "sdpa", Experts: tc.experts}, false)
			p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s, %d layers: %d saved, PEFT %d (%+d)", tc.experts, i+1, got, want, got-want)
			}
		}
	}
}

// LongCat-Flash under PEFT's LoRA (r=4, alpha=8, fp32 adapters, bf16
// weights): longcat-flash-tiny.json (2 layers, each two MLA sublayers, 8
// routed experts of 32 and 4 zero experts, top 3), 2 samples of 32
// tokens, against transformers 5.25.0, peft 0.21.2 and PyTorch 2.15.0 on
// the CPU (the harness counts MLA sublayers: 4 is the config's 2 layers):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/longcat-flash-tiny.json 4 2 32 bfloat16 sdpa nocache lora={all-linear,gate_proj,up_proj,down_proj}
//
// all-linear: saved 1,209,156 bytes, gradients 120,064: every trainable
// adapter's (30,624 parameters, fp32) but the router classifier's 608,
// which PEFT wraps in lora.Linear and the router never calls (it applies
// classifier.weight with its own F.linear): no gradient, so AdamW keeps
// no state for them either. gate_proj, up_proj, down_proj (the experts'
// ParamWrappers alone; the dense mlps.N keep none): 640,964 and 90,112
// (22,528 adapter parameters), the first layer's router saving no fp32
// copy of its weight, its input needing no gradient yet. The saved bytes
// include the router's weight copies (SavedWeightCopies), as
// TestLongcatFlashSavesAsTransformers counts them.
func TestLoRALongcatAsPEFT(t *testing.T) {
	for _, tc := range []struct {
		targets                       []string
		saved, grads, trainable, idle int64
	}{
		{[]string{"all-linear"}, 1209156, 120064, 30624, 608},
		{[]string{"gate_proj", "up_proj", "down_proj"}, 640964, 90112, 22528, 0},
	} {
		p := hfSavedPlan(t, "longcat-flash-tiny.json", 2, "bf16", hf.Options{Attn: "sdpa"}, false)
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: tc.targets}
		rep := evalPlan(t, p)
		if got := rep.SavedActivations + rep.SavedWeightCopies; got != tc.saved {
			t.Errorf("%v: %d bytes saved, PEFT %d (%+d)", tc.targets, got, tc.saved, got-tc.saved)
		}
		if rep.TrainableParams != tc.trainable {
			t.Errorf("%v: %d trainable parameters, PEFT %d", tc.targets, rep.TrainableParams, tc.trainable)
		}
		if rep.States.Grads != tc.grads {
			t.Errorf("%v: %d bytes of gradients, PEFT %d", tc.targets, rep.States.Grads, tc.grads)
		}
		if want := 2 * 4 * (tc.trainable - tc.idle); rep.States.Optimizer != want {
			t.Errorf("%v: %d bytes of AdamW state, want %d (two fp32 moments of the adapters that get a gradient)", tc.targets, rep.States.Optimizer, want)
		}
	}
}

// A grouped GEMM reading PEFT's merged expert weight computes that
// weight's gradient in its backward (the merged weight requires grad:
// grouped_mm's backward runs its weight-gradient grouped GEMM besides
// the input's), which baddbmm then reduces to the adapters'; over the
// frozen 3-D parameter (LoRA on the attention alone) only the input's
// gradient is computed: twice the backward kernels and time under
// grouped_mm; more in the eager loop, whose per-expert slices of the
// merged weight add their gradients into its gradient.
func TestLoRAMoEExpertBackward(t *testing.T) {
	type cost struct{ k, s float64 }
	price := func(file string, opts hf.Options, targets, params []string) (map[string]cost, int) {
		p := hfSavedPlan(t, file, 2, "bf16", opts, false)
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: targets, TargetParameters: params}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		costs := timing.PriceOps(prog, p)
		gemms, merges := map[string]cost{}, 0
		for i, op := range prog.Ops {
			switch op.Kind {
			case "grouped_matmul":
				gemms[op.Name] = cost{costs[i].BwdK, costs[i].Bwd}
			case "matmul": // the eager loop's slice of an expert weight
				if strings.Contains(op.Name, ".experts.") {
					gemms[op.Name] = cost{costs[i].BwdK, costs[i].Bwd}
				}
			case "baddbmm":
				merges++
				if costs[i].Bwd <= 0 {
					t.Errorf("%v: %s has no backward", targets, op.Name)
				}
			}
		}
		return gemms, merges
	}
	for _, tc := range []struct {
		file    string
		opts    hf.Options
		targets []string
		params  []string
	}{
		{"qwen3_moe-tiny.json", hf.Options{Attn: "sdpa"}, []string{"all-linear"}, nil},
		// gpt-oss's eager loop: each expert's matmul on its slice, with a bias parameter
		{"gpt_oss-tiny.json", hf.Options{Attn: "sdpa", Experts: "eager"}, []string{"q_proj"}, []string{"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}},
	} {
		lora, merges := price(tc.file, tc.opts, tc.targets, tc.params)
		frozen, none := price(tc.file, tc.opts, []string{"q_proj"}, nil)
		if len(lora) == 0 || len(lora) != len(frozen) || merges != 4 || none != 0 {
			t.Fatalf("%s: %d expert GEMMs (%d frozen), %d and %d merges: want 4 (gate_up_proj and down_proj a layer) and 0", tc.file, len(lora), len(frozen), merges, none)
		}
		for name, c := range lora {
			f := frozen[name]
			if c.k < 2*f.k || c.s < 2*f.s || (tc.opts.Experts == "" && (c.k != 2*f.k || c.s != 2*f.s)) {
				t.Errorf("%s: %s: %g backward kernels, %g s; over the frozen weight %g, %g s: want twice (and more in the loop)", tc.file, name, c.k, c.s, f.k, f.s)
			}
		}
	}
}
