package sim

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// shrinkConfig reads a config of sim/testdata/hf and overrides some of its
// fields: the family's structure at a size that lowers quickly.
func shrinkConfig(t *testing.T, name string, set map[string]any) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/hf/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		c[k] = v
	}
	out, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// routerOr is the router's module name as route() names it.
func routerOr(m *nn.MoE) string {
	switch {
	case m.Router == nn.RouterSigmoid:
		return "gate"
	case m.RouterName != "":
		return m.RouterName
	case m.Impl == "" || m.Impl == nn.MoELoop || m.LinearRouter:
		return "gate"
	}
	return "router"
}

func firstMoE(m *core.Model) *nn.MoE {
	var moe *nn.MoE
	for _, l := range m.Layers {
		core.Walk(l, "", func(_ string, l core.Layer) {
			if x, ok := l.(*nn.MoE); ok && moe == nil {
				moe = x
			}
		})
	}
	return moe
}

// TestHFTransformers5DeepSeekJambaPhimoe: DeepSeek-V3, GLM-4.5, Jamba and PhiMoE as
// transformers 5.17.0 builds them (models/deepseek_v3/modeling_deepseek_v3.py
// DeepseekV3Experts and DeepseekV3TopkRouter, models/jamba/modeling_jamba.py
// JambaExperts and JambaSparseMoeBlock, models/phimoe/modeling_phimoe.py
// PhimoeExperts, PhimoeTopKRouter and PhimoeDecoderLayer.mlp, all experts
// under @use_experts_implementation, integrations/moe.py): the experts as
// 3-D gate_up_proj and down_proj run as experts= says, the routers as each
// file has them, and the hub configs' parameter counts the same as under
// transformers 4.57.
func TestHFTransformers5DeepSeekJambaPhimoe(t *testing.T) {
	for _, tc := range []struct {
		name, file   string
		small        map[string]any
		block        string // the MoE's module name under 5.x
		router       string // RouterName under 5.x
		linearRouter bool
		paramRouter  bool // the router a parameter module under 4.x too (DeepseekV3TopkRouter, Glm4MoeTopkRouter)
		weightsFP32  bool
		params       []string // names in the small model under 5.17, grouped_mm
	}{
		{name: "deepseek_v3", file: "deepseek-v3.json", block: "mlp", weightsFP32: true, paramRouter: true,
			small: map[string]any{"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 3,
				"first_k_dense_replace": 1, "n_routed_experts": 16, "n_group": 4, "topk_group": 2, "num_experts_per_tok": 4,
				"num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32,
				"qk_rope_head_dim": 16, "v_head_dim": 32, "vocab_size": 1024},
			params: []string{"model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj",
				"model.layers.2.mlp.gate.weight", "model.layers.1.mlp.shared_experts.gate_proj.weight"}},
		// GLM-4.5-Air (models/glm4_moe/modeling_glm4_moe.py at 5.17.0:
		// Glm4MoeExperts and Glm4MoeTopkRouter are DeepSeek-V3's)
		{name: "glm4_moe", file: "glm-4.5-air.json", block: "mlp", weightsFP32: true, paramRouter: true,
			small: map[string]any{"hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 3,
				"first_k_dense_replace": 1, "n_routed_experts": 16, "num_experts_per_tok": 4, "num_attention_heads": 4,
				"num_key_value_heads": 2, "head_dim": 64, "use_qk_norm": true, "vocab_size": 1024},
			params: []string{"model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj",
				"model.layers.2.mlp.gate.weight", "model.layers.1.mlp.shared_experts.gate_proj.weight",
				"model.layers.1.self_attn.k_proj.bias", "model.layers.1.self_attn.q_norm.weight"}},
		{name: "jamba", file: "ai21-jamba-1.5-mini.json", block: "feed_forward", router: "router", linearRouter: true,
			small: map[string]any{"hidden_size": 256, "intermediate_size": 128, "num_hidden_layers": 8, "num_attention_heads": 4,
				"num_key_value_heads": 2, "mamba_dt_rank": 16, "vocab_size": 1024},
			params: []string{"model.layers.1.feed_forward.experts.gate_up_proj", "model.layers.1.feed_forward.experts.down_proj",
				"model.layers.1.feed_forward.router.weight", "model.layers.0.feed_forward.gate_proj.weight"}},
		{name: "phimoe", file: "phi-3.5-moe-instruct.json", block: "mlp", router: "router", linearRouter: true,
			small: map[string]any{"hidden_size": 256, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
				"num_key_value_heads": 2, "vocab_size": 1024},
			params: []string{"model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj",
				"model.layers.0.mlp.router.weight"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hub, err := os.ReadFile("testdata/hf/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			// The hub config: the same parameters under 4.57 and 5.17.
			counts := map[string]int64{}
			for _, v := range []string{"4.57.1", "5.17.0"} {
				m, err := hf.FromConfigOptions(hub, hf.Options{Attn: "sdpa", Transformers: v})
				if err != nil {
					t.Fatal(err)
				}
				counts[v] = m.Params()
			}
			if counts["4.57.1"] != counts["5.17.0"] {
				t.Errorf("params %d under 4.57.1, %d under 5.17.0: the 3-D experts hold the same weights", counts["4.57.1"], counts["5.17.0"])
			}
			small := shrinkConfig(t, tc.file, tc.small)
			for _, c := range []struct{ version, experts, impl string }{
				{"4.57.1", "", nn.MoELoop}, {"5.17.0", "", nn.MoEGroupedMM}, {"5.17.0", "eager", nn.MoEFusedLoop},
			} {
				m, err := hf.FromConfigOptions(small, hf.Options{Attn: "sdpa", Transformers: c.version, Experts: c.experts})
				if err != nil {
					t.Fatal(err)
				}
				moe := firstMoE(m)
				if moe == nil {
					t.Fatal("no MoE block")
				}
				if moe.Impl != c.impl && !(c.impl == nn.MoELoop && moe.Impl == "") {
					t.Errorf("%s %s: impl %q, want %q", c.version, c.experts, moe.Impl, c.impl)
				}
				v5 := c.version == "5.17.0"
				if v5 && (moe.Name != tc.block || moe.RouterName != tc.router || moe.LinearRouter != tc.linearRouter ||
					moe.WeightsFP32 != tc.weightsFP32 || moe.WNames) {
					t.Errorf("%s: block %q router %q (linear %v) weights fp32 %v w-names %v; want %q %q (%v) %v false",
						c.version, moe.Name, moe.RouterName, moe.LinearRouter, moe.WeightsFP32, moe.WNames,
						tc.block, tc.router, tc.linearRouter, tc.weightsFP32)
				}
				p := &core.Plan{Model: m, Batch: 2, Seq: 64, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "bf16"),
					Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda")}
				prog, err := p.LowerProgram()
				if err != nil {
					t.Fatal(err)
				}
				if c.experts == "" && v5 {
					have := map[string]bool{}
					for _, pi := range prog.Params {
						have[pi.Name] = true
					}
					for _, n := range tc.params {
						if !have[n] {
							t.Errorf("no parameter %s", n)
						}
					}
				}
				if _, err := Evaluate(p, core.Options{}); err != nil {
					t.Errorf("%s %s: %v", c.version, c.experts, err)
				}
				// PEFT's "router" target reaches an nn.Linear router (every
				// 4.x loop's, Jamba's and PhiMoE's under 5.x), not a
				// parameter one (DeepSeek's DeepseekV3TopkRouter).
				q := *p
				q.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"router"}}
				want := tc.linearRouter && v5 || !v5 && !tc.paramRouter
				qprog, err := q.LowerProgram()
				if !want { // no module PEFT's "router" reaches: PEFT raises, memsh refuses
					if err == nil || !strings.Contains(err.Error(), "reach no linear module") {
						t.Errorf("%s %s: LoRA on no router: %v, want the error that it reaches no linear module", c.version, c.experts, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				adapted := false
				for _, pi := range qprog.Params {
					adapted = adapted || strings.Contains(pi.Name, "."+moe.Name+"."+routerOr(moe)+".lora.lora_A")
				}
				if !adapted {
					t.Errorf("%s %s: LoRA on the router %v, want %v", c.version, c.experts, adapted, want)
				}
			}
		})
	}
}

// TestDeepSeekV3Transformers5LoopSaves counts by hand what DeepSeek-V3's
// routed experts keep under transformers 5.17's per-expert loop
// (DeepseekV3Experts.forward: final_hidden_states = zeros_like(
// hidden_states), each expert's fp32-weighted output cast .to() its dtype
// before index_add_) against 4.57's DeepseekV3MoE.moe (zeros_like(
// hidden_states, dtype=topk_weights.dtype): the weighted output index_add_-
// ed in fp32). IndexAddBackward0 keeps its source: [S, d] bf16 under 5.x,
// fp32 under 4.x, for S = tokens x top-k routed copies a MoE layer; the
// rest (the copies, the fused gate_up output, the activation, the
// product, the routing weights, the indices) is the same bytes. 4.57
// keeps S x d x 2 bytes more a MoE layer.
func TestDeepSeekV3Transformers5LoopSaves(t *testing.T) {
	const d, experts, topK, moeLayers, batch, seq = 256, 16, 4, 2, 2, 128
	small := shrinkConfig(t, "deepseek-v3.json", map[string]any{"hidden_size": d, "intermediate_size": 512,
		"moe_intermediate_size": 64, "num_hidden_layers": 1 + moeLayers, "first_k_dense_replace": 1, "n_routed_experts": experts,
		"n_group": 4, "topk_group": 2, "num_experts_per_tok": topK, "num_attention_heads": 4, "num_key_value_heads": 4,
		"q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "vocab_size": 1024})
	saved := map[string]int64{}
	for _, v := range []struct{ version, experts string }{{"4.57.1", ""}, {"5.17.0", "eager"}} {
		m, err := hf.FromConfigOptions(small, hf.Options{Attn: "sdpa", Transformers: v.version, Experts: v.experts})
		if err != nil {
			t.Fatal(err)
		}
		p := &core.Plan{Model: m, Batch: batch, Seq: seq, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "bf16"),
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda")}
		saved[v.version] = evalPlan(t, p).SavedActivations
	}
	const S = batch * seq * topK
	if got, want := saved["4.57.1"]-saved["5.17.0"], int64(moeLayers*S*d*2); got != want {
		t.Errorf("4.57's loop keeps %d B more than 5.17's, want %d (%d MoE layers x S %d x d %d x 2 B)", got, want, moeLayers, S, d)
	}
}
