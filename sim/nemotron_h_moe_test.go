package sim

import (
	"strconv"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// NVIDIA Nemotron 3 Nano 30B-A3B's parameters: 31,577,937,344, which
// transformers 5.25.0 counts on the meta device for
// nemotron-3-nano-30b-a3b.json (NemotronHForCausalLM under
// torch.device("meta"), summing numel; the file is the published
// config.json as public code copies it, the hub unreachable), the card's
// 31.6 B: 52 layers of 2688 (23 Mamba-2, 6 attention, 23 MoE layers of
// 128 experts of 1856, top 6, one shared expert of 3712), an untied head.
// Per kind over the 23 MoE layers: experts' up_proj and down_proj
// 14,687,404,032 each, gate.weight 7,913,472, shared_experts' up_proj and
// down_proj 229,490,688 each. Its Mamba-2 mixers are 64 heads of 64
// (4,096 wide, not expand 2 x 2,688: NemotronHMamba2Mixer reads no expand).
func TestNemotronHMoEParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"nemotron-3-nano-30b-a3b.json": 31_577_937_344,
	})
}

// What a tiny Nemotron-H keeps for backward, with its parameter and
// gradient bytes, against transformers on PyTorch 2.15.0 (the CPU, sdpa,
// use_cache=False, loaded as from_pretrained loads it; 2 samples of 32
// tokens): nemotron-h-moe-tiny.json (64 wide; attention 4 heads of 16, 2
// kv heads; MLP 96; 8 experts of 32, top 2, a shared expert of 48)
// with hybrid_override_pattern set to the row's:
//
//	[PYTHONPATH=tf5.23.0] python tools/oracle/hf_block_saved.py CONFIG.json 1 2 32 {float32,bfloat16} sdpa nocache keepfp32
//
// (the layer count is the pattern's; "kept" is compared). Exact for every
// kind of layer but Mamba-2's (whose CPU path is not the kernels memsh
// lowers). From 5.18 every block's NemotronHRMSNorm multiplies the fp32
// rows by weight.to(float32) (nn.Norm.WeightFP32): in bf16 it keeps the
// fp32 rows and the weight's fp32 copy, 8,448 B a norm more than Llama's
// norm here. At 5.23.0 the router's weight loads in bf16 (gate.weight is
// kept fp32 from 5.24) and F.linear(x.float(), weight.float()) keeps its
// fp32 copy, 2,048 B an MoE layer (memsh: a saved weight copy), and the
// parameters are 1,024 B an MoE layer fewer.
func TestNemotronHSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		pattern, version, precision string
		kept, params, grads         int64
	}{
		{"E", "5.25.0", "fp32", 295_716, 289_280, 289_280},
		{"E", "5.25.0", "bf16", 234_788, 145_664, 145_664},
		{"EE", "5.25.0", "fp32", 475_460, 447_232, 447_232},
		{"EE", "5.25.0", "bf16", 361_540, 225_664, 225_664},
		{"-", "5.25.0", "bf16", 174_084, 90_368, 90_368},
		{"--", "5.25.0", "bf16", 240_132, 115_072, 115_072},
		{"*", "5.25.0", "bf16", 175_108, 90_368, 90_368},
		{"**", "5.25.0", "bf16", 242_180, 115_072, 115_072},
		{"*-E-E", "5.25.0", "fp32", 772_164, 595_456, 595_456},
		{"*-E-E", "5.25.0", "bf16", 560_708, 299_776, 299_776},
		{"*-E-E", "5.23.0", "fp32", 772_164, 595_456, 595_456},
		{"*-E-E", "5.23.0", "bf16", 564_804, 297_728, 297_728},
	} {
		name := tc.pattern + " " + tc.version + " " + tc.precision
		cfg := strings.NewReplacer(`"hybrid_override_pattern": "EE"`, `"hybrid_override_pattern": "`+tc.pattern+`"`,
			`"num_hidden_layers": 2`, `"num_hidden_layers": `+strconv.Itoa(len(tc.pattern))).Replace(string(readHF(t, "nemotron-h-moe-tiny.json")))
		m, err := hf.FromConfigOptions([]byte(cfg), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if err != nil {
			t.Fatal(name, err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 32
		if p.Precision, err = core.LookupPrecision(tc.precision); err != nil {
			t.Fatal(err)
		}
		r := evalPlan(t, p)
		if got := r.SavedActivations + r.SavedWeightCopies; got != tc.kept {
			t.Errorf("%s: memsh keeps %d bytes, transformers %d (%+d)", name, got, tc.kept, got-tc.kept)
		}
		if r.States.Params != tc.params || r.States.Grads != tc.grads {
			t.Errorf("%s: parameters %d B and gradients %d B, transformers %d and %d", name, r.States.Params, r.States.Grads, tc.params, tc.grads)
		}
	}
}

// What hf_config refuses for Nemotron-H's MoE layers, naming the key.
func TestNemotronHMoERefuses(t *testing.T) {
	tiny := string(readHF(t, "nemotron-h-moe-tiny.json"))
	for _, tc := range []struct {
		name, from, to, version, want string
	}{
		{"before 5.3", "", "", "5.2.0", `hybrid_override_pattern has E (MoE) layers, which transformers first builds in 5.3`},
		{"latent", `"n_group": 1`, `"n_group": 1, "moe_latent_size": 16`, "", `"moe_latent_size" is not modelled`},
		{"n_group", `"n_group": 1`, `"n_group": 3`, "", `"n_group" must divide n_routed_experts (8)`},
		{"topk_group", `"topk_group": 1`, `"topk_group": 2`, "", `"topk_group" must be at most n_group`},
		{"act", `"mlp_hidden_act": "relu2"`, `"mlp_hidden_act": "silu"`, "", `"mlp_hidden_act" names an activation`},
		{"pattern", `"EE"`, `"EX"`, "", `has "X": memsh reads M (Mamba-2), * (attention), - (MLP) and E (MoE)`},
	} {
		cfg := tiny
		if tc.from != "" {
			cfg = strings.Replace(tiny, tc.from, tc.to, 1)
		}
		_, err := hf.FromConfigOptions([]byte(cfg), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %s", tc.name, err, tc.want)
		}
	}
}

// Parameter names follow the module tree of the release: transformers'
// own NemotronHForCausalLM (from 5.3) holds the base model as "model"
// (5.25.0 on the meta device: model.layers.1.mixer.gate.weight,
// model.layers.1.mixer.experts.up_proj,
// model.layers.1.mixer.shared_experts.up_proj.weight, model.norm_f.weight),
// the hub's remote code run before it as "backbone". Both name the MLPs'
// projections up_proj and down_proj (NemotronHMLP).
func TestNemotronHNames(t *testing.T) {
	for _, tc := range []struct {
		file, version string
		want          []string
	}{
		{"nemotron-h-moe-tiny.json", "5.25.0", []string{"model.embeddings.weight", "model.layers.1.mixer.gate.weight",
			"model.layers.1.mixer.experts.up_proj", "model.layers.1.mixer.experts.down_proj",
			"model.layers.1.mixer.shared_experts.up_proj.weight", "model.layers.1.mixer.shared_experts.down_proj.weight",
			"model.layers.1.norm.weight", "model.norm_f.weight", "lm_head.weight"}},
		{"nemotron-h-8b-base-8k.json", "4.53.3", []string{"backbone.embeddings.weight", "backbone.layers.0.mixer.in_proj.weight",
			"backbone.layers.1.mixer.up_proj.weight", "backbone.layers.1.mixer.down_proj.weight", "backbone.norm_f.weight"}},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if err != nil {
			t.Fatal(err)
		}
		prog, err := tinyPlan(t, m).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, p := range prog.Params {
			have[p.Name] = true
		}
		for _, n := range tc.want {
			if !have[n] {
				t.Errorf("%s %s: no parameter %s", tc.file, tc.version, n)
			}
		}
	}
}

// TestNemotronHEagerMaskHeld: NemotronHModel makes its attention layers'
// causal mask once a forward (create_causal_mask) and hands it to each;
// under eager it is a float [batch, 1, seq, seq] in the model's dtype,
// which every checkpointed layer's partial holds to its backward (as
// JambaModel's, the same code: modeling_jamba.py 5.25.0 l. 1007; as
// Granite 4.0-H's). Under sdpa no mask (is_causal). Against transformers
// 5.25.0, torch 2.15.0, CPU, bf16, 2 x 32 tokens, every layer checkpointed,
// hybrid_override_pattern "*" and "**" (one and two attention layers):
//
//	python tools/oracle/hf_block_saved.py CONFIG.json {1,2} 2 32 bfloat16 {sdpa,eager} nocache keepfp32 ckpt held
//
// saved 116,228 / 124,420 either way; held 256 under sdpa (position_ids,
// (1, 32) int64: core.Model.PositionIDs) and 4,352 under eager (the
// (2, 1, 32, 32) bf16 mask besides, 4,096, one at any depth).
func TestNemotronHEagerMaskHeld(t *testing.T) {
	for _, tc := range []struct {
		pattern, attn string
		saved, held   int64
	}{
		{"*", "sdpa", 116_228, 256},
		{"**", "sdpa", 124_420, 256},
		{"*", "eager", 116_228, 4_352},
		{"**", "eager", 124_420, 4_352},
	} {
		cfg := strings.NewReplacer(`"hybrid_override_pattern": "EE"`, `"hybrid_override_pattern": "`+tc.pattern+`"`,
			`"num_hidden_layers": 2`, `"num_hidden_layers": `+strconv.Itoa(len(tc.pattern))).Replace(string(readHF(t, "nemotron-h-moe-tiny.json")))
		m, err := hf.FromConfigOptions([]byte(cfg), hf.Options{Attn: tc.attn, Transformers: "5.25.0"})
		if err != nil {
			t.Fatal(tc.pattern, err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 32
		if p.Precision, err = core.LookupPrecision("bf16"); err != nil {
			t.Fatal(err)
		}
		p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
		want := tc.saved + tc.held
		if got := evalPlan(t, p).SavedActivations; got != want {
			t.Errorf("%s %s: memsh keeps %d bytes, transformers %d (%+d)", tc.pattern, tc.attn, got, want, got-want)
		}
	}
}
