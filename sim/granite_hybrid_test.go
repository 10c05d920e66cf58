package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What a Granite 4.0-H (granitemoehybrid) attention layer, its routed
// experts and its shared expert keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, grouped_mm experts):
// granitemoehybrid-tiny.json (64 wide, 4 heads of 16, 2 kv heads, rope, 4
// experts of 32, top 2, a shared expert of 96, every multiplier off 1;
// every layer attention), 2 samples of 32 tokens, 1 and 2 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/granitemoehybrid-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// The shared expert's input_linear output is one [tokens, 2 x 96] storage
// whose two halves the activation and the product keep (nn.FusedGLU). Its
// Mamba-2 layers run the mamba_ssm kernel on a GPU (nn.Mamba2); the CPU
// runs the PyTorch chunked scan instead, which memsh does not model: they
// are checked with the kernel's node standing in (below).
func TestGraniteMoeHybridSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"granitemoehybrid-tiny.json", "fp32", "sdpa", 503572, 887076},
		{"granitemoehybrid-tiny.json", "fp32", "eager", 551700, 983332},
		{"granitemoehybrid-tiny.json", "bf16", "sdpa", 312852, 524068},
		{"granitemoehybrid-tiny.json", "bf16", "eager", 369172, 636708},
	})
}

// Granite 4.0-H's Mamba-2 layers with their experts: the first one and
// two layers of granitemoehybrid-mamba-tiny.json (Mamba-2 layers of 8
// heads of 16, state 16, one group; the same experts), the mamba_ssm
// kernel's node standing in for the kernel the CPU lacks (what it keeps
// read from mamba_ssm's source; sim/falcon_h1_test.go):
//
//	python tools/oracle/mamba2_kernel_saved.py sim/testdata/hf/granitemoehybrid-mamba-tiny.json {1,2} 2 32 {float32,bfloat16} sdpa nocache
func TestGraniteMoeHybridMambaSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		one, two  int64
	}{
		{"fp32", 558164, 1000356},
		{"bf16", 339796, 580004},
	} {
		one := graniteSaved(t, "granitemoehybrid-mamba-tiny.json", 1, tc.precision, "sdpa", false)
		two := graniteSaved(t, "granitemoehybrid-mamba-tiny.json", 2, tc.precision, "sdpa", false)
		if one != tc.one || two != tc.two {
			t.Errorf("%s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.precision, one, one-tc.one, two, two-tc.two)
		}
	}
}

// The parameters of granitemoehybrid-mamba-tiny.json (two Mamba-2 layers
// and one attention layer, no rope), named and counted as transformers
// 5.25.0 builds GraniteMoeHybridForCausalLM on the meta device (215,088;
// the tied head once); the granite and granitemoe tiny configs' counts
// likewise, and granite-3.3-8b-instruct's (its config.json as the hub
// serves it, transformers_version 4.49.0): 8,170,864,640, the hub's
// "8.17B"; granite-4.0-h-small-sizes.json's, a config of Granite
// 4.0-H-Small's published sizes (docs/models.md), 32,207,337,984: the
// card's 32B.
func TestGraniteParams(t *testing.T) {
	for file, want := range map[string]int64{
		"granite-tiny.json":                90_432,
		"granitemoe-tiny.json":             90_944,
		"granitemoehybrid-tiny.json":       127_808,
		"granitemoehybrid-mamba-tiny.json": 215_088,
		"granite-3.3-8b-instruct.json":     8_170_864_640,
		"granite-4.0-h-small-sizes.json":   32_207_337_984,
	} {
		m, err := hf.FromConfig(readHF(t, file), "sdpa")
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if got := m.Params(); got != want {
			t.Errorf("%s: %d parameters, transformers %d", file, got, want)
		}
	}
	m, err := hf.FromConfig(readHF(t, "granitemoehybrid-mamba-tiny.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, n := range []string{"model.embed_tokens.weight", "model.norm.weight",
		"model.layers.0.mamba.in_proj.weight", "model.layers.0.mamba.conv1d.weight", "model.layers.0.mamba.conv1d.bias",
		"model.layers.0.mamba.dt_bias", "model.layers.0.mamba.A_log", "model.layers.0.mamba.D",
		"model.layers.0.mamba.norm.weight", "model.layers.0.mamba.out_proj.weight",
		"model.layers.0.block_sparse_moe.router.weight", "model.layers.0.block_sparse_moe.experts.gate_up_proj",
		"model.layers.0.block_sparse_moe.experts.down_proj",
		"model.layers.0.shared_mlp.input_linear.weight", "model.layers.0.shared_mlp.output_linear.weight",
		"model.layers.2.self_attn.q_proj.weight", "model.layers.2.self_attn.o_proj.weight",
		"model.layers.2.input_layernorm.weight", "model.layers.2.post_attention_layernorm.weight",
	} {
		if !names[n] {
			t.Errorf("no parameter %s", n)
		}
	}
}

// Bad Granite and Falcon-H1 configs are refused, naming the key.
func TestGraniteFalconH1Refusals(t *testing.T) {
	for _, tc := range []struct {
		file, from, to, want string
	}{
		{"granite-tiny.json", `"residual_multiplier": 0.22`, `"residual_multiplier": 0`, `"residual_multiplier" must be a positive number`},
		{"granite-tiny.json", `"logits_scaling": 16.0`, `"logits_scaling": "x"`, `"logits_scaling" must be a number`},
		{"granitemoe-tiny.json", `"num_experts_per_tok": 2`, `"num_experts_per_tok": 9`, `"num_experts_per_tok"`},
		{"granitemoehybrid-tiny.json", `["attention", "attention"]`, `["attention"]`, `"layer_types" must list one layer type per layer (2`},
		{"granitemoehybrid-tiny.json", `["attention", "attention"]`, `["attention", "mlp"]`, `"layer_types" entry 1 must be "mamba" or "attention" (got the string "mlp")`},
		{"granitemoehybrid-tiny.json", `"position_embedding_type": "rope"`, `"position_embedding_type": "alibi"`, `"position_embedding_type" must be "rope", "nope" or null`},
		{"granitemoehybrid-mamba-tiny.json", `"mamba_d_head": 16`, `"mamba_d_head": 12`, `"mamba_d_head" times mamba_n_heads (12 x 8) must be mamba_expand x hidden_size (128)`},
		{"granitemoehybrid-mamba-tiny.json", `"mamba_n_groups": 1`, `"mamba_n_groups": 3`, `"mamba_n_groups"`},
		{"falcon-h1-tiny.json", `"mlp_multipliers": [0.88, 0.56]`, `"mlp_multipliers": [0.88]`, `"mlp_multipliers" must be a list of 2 multipliers`},
		{"falcon-h1-tiny.json", `"ssm_in_multiplier": 1.25`, `"ssm_in_multiplier": -1`, `"ssm_in_multiplier" must be a positive number`},
		{"falcon-h1-tiny.json", `"mamba_d_ssm": 96`, `"mamba_d_ssm": 100`, `"mamba_d_head" times mamba_n_heads (16 x 6) must be the mixer's channels, mamba_d_ssm (100)`},
		{"falcon-h1-tiny.json", `"mamba_rms_norm": false`, `"mamba_rms_norm": false, "projectors_bias": true`, `"projectors_bias" must equal mamba_proj_bias`},
	} {
		cfg := string(readHF(t, tc.file))
		if !strings.Contains(cfg, tc.from) {
			t.Fatalf("%s has no %s", tc.file, tc.from)
		}
		_, err := hf.FromConfig([]byte(strings.Replace(cfg, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s with %s: error %v, want one containing %s", tc.file, tc.to, err, tc.want)
		}
	}
}

// A transformers release older than the family's first is refused: the
// wheels of 4.44.2, 4.51.3 and 4.52.4 have no models/granite,
// models/granitemoehybrid and models/falcon_h1; 4.45.0, 4.52.0 and 4.53.0
// have them.
func TestGraniteFalconH1Since(t *testing.T) {
	for _, tc := range []struct{ file, before, first string }{
		{"granite-tiny.json", "4.44.2", "4.45.0"},
		{"granitemoe-tiny.json", "4.44.2", "4.45.0"},
		{"granitemoehybrid-tiny.json", "4.51.3", "4.52.0"},
		{"falcon-h1-tiny.json", "4.52.4", "4.53.0"},
	} {
		if _, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Transformers: tc.before}); err == nil {
			t.Errorf("%s under transformers %s: built, want refused", tc.file, tc.before)
		}
		if _, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Transformers: tc.first}); err != nil {
			t.Errorf("%s under transformers %s: %v", tc.file, tc.first, err)
		}
	}
}
