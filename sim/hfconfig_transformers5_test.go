package sim

import (
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// From transformers 5.0 the MoE blocks keep their experts as 3-D
// parameters and run them as experts_implementation says, grouped_mm by
// default; before, as nn.Linear modules in a loop. transformers 5 writes
// Qwen3-MoE's expert count as num_local_experts (attribute_map), the hub's
// configs as num_experts: both are read.
func TestHFTransformers5Experts(t *testing.T) {
	hub, err := os.ReadFile("testdata/hf/qwen3-30b-a3b.json")
	if err != nil {
		t.Fatal(err)
	}
	small, err := os.ReadFile("testdata/cuda_h200/configs/qwen3-moe-small.json")
	if err != nil {
		t.Fatal(err)
	}
	mixtral, err := os.ReadFile("testdata/cuda_h200/configs/mixtral-small.json")
	if err != nil {
		t.Fatal(err)
	}
	dense, err := os.ReadFile("testdata/cuda_h200/configs/llama-3.2-1b.json")
	if err != nil {
		t.Fatal(err)
	}
	phimoe, err := os.ReadFile("testdata/hf/phi-3.5-moe-instruct.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		config   []byte
		version  string
		experts  string
		impl     string // the MoE's impl
		experts0 int64
		params   []string // parameter names that must be there
		modules  []string // module paths some op runs in
		// noExpertModules: no op runs in a module under the experts one
		noExpertModules bool
		err             string // an error naming this
		weightsFP32     bool
		wantParamsNum   int64 // sum(p.numel()) of the record (hf.jsonl "params"), 0 = unchecked
	}{
		{name: "qwen3-moe 5.17 default", config: small, version: "5.17.0", impl: nn.MoEGroupedMM, experts0: 32,
			params:        []string{"model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.experts.down_proj", "model.layers.0.mlp.gate.weight"},
			wantParamsNum: 756_042_752},
		{name: "qwen3-moe 5.17 eager", config: small, version: "5.17.0", experts: "eager", impl: nn.MoEFusedLoop, experts0: 32,
			params: []string{"model.layers.7.mlp.experts.gate_up_proj", "model.layers.7.mlp.gate.weight"}, wantParamsNum: 756_042_752},
		{name: "qwen3-moe hub config, 4.57", config: hub, version: "4.57.1", impl: nn.MoELoop, experts0: 128,
			params: []string{"model.layers.0.mlp.experts.0.gate_proj.weight", "model.layers.0.mlp.gate.weight"}},
		{name: "qwen3-moe hub config, 5.0", config: hub, version: "5.0.0", impl: nn.MoEGroupedMM, experts0: 128,
			params: []string{"model.layers.47.mlp.experts.down_proj"}},
		{name: "mixtral 5.17", config: mixtral, version: "5.17.0", impl: nn.MoEGroupedMM, experts0: 8, weightsFP32: true,
			params: []string{"model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.gate.weight"}, wantParamsNum: 795_427_840},
		{name: "mixtral 4.57", config: mixtral, version: "4.57.1", impl: nn.MoELoop, experts0: 8,
			params:        []string{"model.layers.0.block_sparse_moe.experts.0.w1.weight", "model.layers.0.block_sparse_moe.gate.weight"},
			modules:       []string{"model.layers.0.block_sparse_moe.experts.0.w2"},
			wantParamsNum: 795_427_840},
		// transformers 5's MixtralExperts and PhimoeExperts hold
		// gate_up_proj and down_proj, no w1, w2, w3 (hfExperts.noWNames),
		// and no module per expert: the eager loop runs in the experts
		// module itself, F.linear on gate_up_proj[expert_idx] and
		// down_proj[expert_idx] (modeling_mixtral.py MixtralExperts.forward
		// at 5.25.0), so its ops are that module's (noExpertModules).
		{name: "mixtral 5.17 eager", config: mixtral, version: "5.17.0", experts: "eager", impl: nn.MoEFusedLoop, experts0: 8, weightsFP32: true,
			params: []string{"model.layers.0.mlp.experts.down_proj"}, modules: []string{"model.layers.0.mlp.experts"}, noExpertModules: true},
		{name: "phimoe 5.17 eager", config: phimoe, version: "5.17.0", experts: "eager", impl: nn.MoEFusedLoop, experts0: 16,
			params: []string{"model.layers.0.mlp.experts.down_proj", "model.layers.0.mlp.router.weight"}, modules: []string{"model.layers.0.mlp.experts"}, noExpertModules: true},
		{name: "experts= before 5.0", config: mixtral, version: "4.57.1", experts: "eager", err: "needs transformers 5.0"},
		{name: "experts= on a dense model", config: dense, version: "5.17.0", experts: "eager", err: `model_type "llama" has no MoE blocks`},
		{name: "unknown experts=", config: mixtral, version: "5.17.0", experts: "batched_mm", err: `experts must be "grouped_mm", "eager" or "megatron"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := hf.FromConfigOptions(tc.config, hf.Options{Attn: "sdpa", Transformers: tc.version, Experts: tc.experts})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var moe *nn.MoE
			core.Walk(m.Layers[0], "", func(_ string, l core.Layer) {
				if x, ok := l.(*nn.MoE); ok && moe == nil {
					moe = x
				}
			})
			if moe == nil {
				t.Fatal("no MoE block")
			}
			if moe.Impl != tc.impl && !(tc.impl == nn.MoELoop && moe.Impl == "") {
				t.Errorf("impl %q, want %q", moe.Impl, tc.impl)
			}
			if moe.Experts != tc.experts0 || moe.WeightsFP32 != tc.weightsFP32 {
				t.Errorf("experts %d, weights fp32 %v; want %d, %v", moe.Experts, moe.WeightsFP32, tc.experts0, tc.weightsFP32)
			}
			if tc.wantParamsNum != 0 && m.Params() != tc.wantParamsNum {
				t.Errorf("params %d, want %d", m.Params(), tc.wantParamsNum)
			}
			p := &core.Plan{Model: m, Batch: 1, Seq: 16, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "bf16"),
				Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda")}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			have := map[string]bool{}
			for _, pi := range prog.Params {
				have[pi.Name] = true
			}
			for _, n := range tc.params {
				if !have[n] {
					t.Errorf("no parameter %s", n)
				}
			}
			ran := map[string]bool{}
			for _, op := range prog.Ops {
				ran[op.Module] = true
				if tc.noExpertModules && strings.Contains(op.Module, ".experts.") {
					t.Errorf("%s runs in %s: the experts module has no module per expert", op.Name, op.Module)
				}
				if w := op.Module[strings.LastIndexByte(op.Module, '.')+1:]; (w == "w1" || w == "w2" || w == "w3") && !strings.HasPrefix(tc.version, "4.") {
					t.Errorf("%s: transformers %s has no module %s", op.Name, tc.version, op.Module)
				}
			}
			for _, n := range tc.modules {
				if !ran[n] {
					t.Errorf("no op runs in %s", n)
				}
			}
		})
	}
}

// TestGroupedMMSaves counts by hand what transformers 5.17's grouped_mm
// experts save against its per-expert loop (integrations/moe.py
// grouped_mm_experts_forward; Qwen3MoeExperts.forward), for the H200
// record's Qwen3-MoE (hidden d = 1,024, moe_intermediate 512, 32 experts,
// top-8, 8 layers) at 4 x 2,048 tokens: S = 65,536 routed copies.
//
// Both keep the routed rows [S, d], the gate and up halves [S, 2h], the
// activation and the product [S, h] each, the down projection's output
// [S, d] and the routing weights [S, 1]. The loop also keeps, per expert,
// the weighted output its index_add_ reads (IndexAddBackward0 keeps the
// source: [S, d] bf16 over all experts) and two int64 indices per row
// (token and top-k slot: 16 B); grouped_mm keeps three int64 indices per
// row (perm // top_k, perm, inv_perm: 24 B), the sentinel mask (bool
// [S, 1]: 1 B) and the experts' offsets its GEMMs' backward takes (int32
// [E]: 128 B). The loop keeps S x (2d - 9) - 4E bytes more a layer.
func TestGroupedMMSaves(t *testing.T) {
	// Under tensor parallelism (tp 2, no sequence parallelism: every rank
	// routes all tokens) each rank holds half of every expert's hidden
	// size, in both: the difference stays.
	for _, tp := range []int64{1, 2} {
		saved := map[string]int64{}
		for _, experts := range []string{"grouped_mm", "eager"} {
			m := hfH200Model(t, "qwen3-moe-small", experts)
			p := &core.Plan{Model: m, Batch: 4, Seq: 2048, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "bf16"),
				Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda"),
				Parallel: core.Parallelism{TP: tp}}
			saved[experts] = evalPlan(t, p).SavedActivations
		}
		const S, d, E, layers = 4 * 2048 * 8, 1024, 32, 8
		if got, want := saved["eager"]-saved["grouped_mm"], int64(layers*(S*(2*d-9)-4*E)); got != want {
			t.Errorf("tp %d: the loop saves %d B more than grouped_mm, want %d (8 layers x (S x (2d - 9) - 4E))", tp, got, want)
		}
	}
}

func mustPrecision(t testing.TB, name string) core.Precision {
	t.Helper()
	p, err := core.LookupPrecision(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustDevice(t testing.TB, name string) hw.Device {
	t.Helper()
	d, err := hw.LookupDevice(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustRuntime(t testing.TB, name string) core.Runtime {
	t.Helper()
	r, err := core.LookupRuntime(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGroupedMMLayouts: transformers 5's experts lower under the layouts
// and settings a plan may add (expert tensor parallelism splits each
// expert's hidden size: the grouped GEMMs' widths follow the 3-D weights).
func TestGroupedMMLayouts(t *testing.T) {
	for _, experts := range []string{"grouped_mm", "eager"} {
		m := hfH200Model(t, "qwen3-moe-small", experts)
		for _, tc := range []struct {
			name string
			edit func(p *core.Plan)
		}{
			{"tp 2", func(p *core.Plan) { p.Parallel = core.Parallelism{TP: 2} }},
			{"dp 2 ep 2", func(p *core.Plan) { p.Parallel = core.Parallelism{DP: 2, EP: 2} }},
			{"checkpoint", func(p *core.Plan) { p.Checkpoint = core.Checkpoint{Mode: "full"} }},
			{"autocast", func(p *core.Plan) { p.Precision = mustPrecision(t, "bf16-mixed") }},
			{"eval", func(p *core.Plan) { p.Phase = core.Eval }},
		} {
			p := &core.Plan{Model: m, Batch: 2, Seq: 256, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "bf16"),
				Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda")}
			tc.edit(p)
			if _, err := Evaluate(p, core.Options{}); err != nil {
				t.Errorf("%s, %s: %v", experts, tc.name, err)
			}
		}
	}
}
