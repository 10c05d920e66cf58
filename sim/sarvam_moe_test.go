package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Sarvam MoE's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, loaded by from_pretrained):
// sarvam_moe-tiny.json (SarvamMoEConfig, built as Glm4MoeForCausalLM; the
// original checkpoints' names num_experts, num_shared_experts and
// use_qkv_bias; 64 wide, 4 heads of 16, 2 kv heads, q, k and v biased,
// per-head q and k norms and the whole head rotated by default; layer 0
// dense of 96, layers 1 and 2 of 4 experts of 32, 2 a token, one shared),
// 2 samples of 32 tokens, at 1, 2 and 3 layers, the experts as
// grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/sarvam_moe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// param_bytes and grad_bytes at 3 layers: 538,240 in fp32 (134,560
// parameters), 270,144 in bf16 (the two routers' 512 weights kept fp32).
func TestSarvamMoeSavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "sarvam_moe-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{401_668, 787_988, 1_174_308}},
		{"fp32", "eager", [3]int64{433_412, 851_476, 1_269_540}},
		{"bf16", "sdpa", [3]int64{256_260, 499_220, 742_180}},
		{"bf16", "eager", [3]int64{304_388, 595_476, 886_564}},
	})
}

// The same with the experts as transformers' eager loop
// (experts_implementation "eager"):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/sarvam_moe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32 eagerexperts
//
// less the views the loop takes of gate_up_proj and down_proj, which the
// harness counts (4 x 64 x 64 + 4 x 64 x 32 elements an MoE layer;
// TestFlexOlmoExpertsAsTransformers).
func TestSarvamMoeEagerExpertsAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		bytes           int64
		saved           [3]int64
	}{
		{"fp32", "sdpa", 4, [3]int64{401_668, 918_020, 1_434_372}},
		{"fp32", "eager", 4, [3]int64{433_412, 981_508, 1_529_604}},
		{"bf16", "sdpa", 2, [3]int64{256_260, 563_716, 871_172}},
		{"bf16", "eager", 2, [3]int64{304_388, 659_972, 1_015_556}},
	} {
		for i, saved := range tc.saved {
			want := saved - int64(i)*(4*64*64+4*64*32)*tc.bytes
			experts := "eager"
			if i == 0 { // layer 0 is dense: experts= is refused where no MoE block runs
				experts = ""
			}
			got := hfSaved(t, "sarvam_moe-tiny.json", i+1, tc.precision, hf.Options{Attn: tc.attn, Experts: experts}, false)
			if got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d bytes, transformers %d, %d without the parameter views (%+d)", tc.precision, tc.attn, i+1, got, saved, want, got-want)
			}
		}
	}
}

// sarvamDefaults is a config.json that leaves every key SarvamMoEConfig
// defaults to its default (transformers 5.25.0), the sizes memsh always
// asks for written as the class's: the "Sarvam-30B style configuration"
// its docstring builds.
const sarvamDefaults = `{"model_type": "sarvam_moe", "architectures": ["SarvamMoEForCausalLM"], "vocab_size": 262144,
 "hidden_size": 4096, "intermediate_size": 8192, "num_hidden_layers": 19, "num_attention_heads": 64,
 "num_key_value_heads": 4, "moe_intermediate_size": 1024, "num_experts_per_tok": 6}`

// The parameters: sarvam_moe-tiny.json 134,560 (the harness's fp32
// param_bytes / 4); SarvamMoEConfig()'s defaults 32,152,648,064
// (head_dim 64, q and k norms, 128 experts, one shared, one dense layer;
// on the meta device, transformers 5.25.0:
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AutoModelForCausalLM.from_config(t.SarvamMoEConfig()).parameters()))"
//
// ). A
// config.json naming the remote code's SarvamMoEForCausalLM builds the
// causal LM, as transformers' AutoModelForCausalLM does.
func TestSarvamMoeParams(t *testing.T) {
	checkParams(t, map[string]int64{"sarvam_moe-tiny.json": 134_560})
	m, err := hf.FromConfig([]byte(sarvamDefaults), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 32_152_648_064 {
		t.Errorf("SarvamMoEConfig's defaults: %d parameters, want 32,152,648,064", got)
	}
}

// A partial_rotary_factor inside rope_parameters is the one transformers
// keeps (SarvamMoEConfig's __post_init__ only sets a default):
// sarvam_moe-tiny.json with "rope_parameters": {"rope_type": "default",
// "rope_theta": 10000.0, "partial_rotary_factor": 0.5} (written to a
// temporary file), fp32, sdpa:
//
//	python tools/oracle/hf_block_saved.py /tmp/sarvam_moe-rope.json {1,2,3} 2 32 float32 sdpa nocache keepfp32
func TestSarvamMoeRopeAsTransformers(t *testing.T) {
	tiny := string(readHF(t, "sarvam_moe-tiny.json"))
	rope := strings.Replace(tiny, `"max_position_embeddings": 256`, `"max_position_embeddings": 256, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}`, 1)
	for i, want := range [3]int64{399_620, 785_940, 1_172_260} {
		p := hfOraclePlan(t, []byte(strings.Replace(rope, `"num_hidden_layers": 3`, `"num_hidden_layers": `+string(rune('1'+i)), 1)), hf.Options{Attn: "sdpa"}, "fp32")
		if got := evalPlan(t, p).SavedActivations; got != want {
			t.Errorf("rope_parameters' factor 0.5, %d layers: memsh keeps %d bytes, transformers %d (%+d)", i+1, got, want, got-want)
		}
	}
}

// sarvam_moe under 5.23.0 is refused (the 5.24.0 wheel is the first with
// models/sarvam_moe); a key set under both its names, and two
// partial_rotary_factors that differ, are refused naming the key; the
// names are transformers' (Glm4MoeForCausalLM's).
func TestSarvamMoeConfig(t *testing.T) {
	tiny := string(readHF(t, "sarvam_moe-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.23.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "sarvam_moe" needs transformers 5.24 or later`) {
		t.Errorf("transformers 5.23.0: error %v, want one naming 5.24", err)
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.24.0"}); err != nil {
		t.Errorf("transformers 5.24.0: %v", err)
	}
	for _, tc := range []struct{ name, to, want string }{
		{"both expert counts", `"num_experts": 4, "n_routed_experts": 4,`, `"num_experts" and "n_routed_experts" are both set`},
		{"both bias keys", `"num_experts": 4, "attention_bias": true,`, `"use_qkv_bias" and "attention_bias" are both set`},
		{"two rotary factors", `"num_experts": 4, "partial_rotary_factor": 1.0, "rope_parameters": {"partial_rotary_factor": 0.5},`, "partial_rotary_factor"},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, `"num_experts": 4,`, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %s", tc.name, err, tc.want)
		}
	}
	checkHasParams(t, tiny, "model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_up_proj",
		"model.layers.2.mlp.shared_experts.down_proj.weight", "model.layers.0.mlp.gate_proj.weight",
		"model.layers.0.self_attn.q_norm.weight", "model.layers.0.self_attn.q_proj.bias", "lm_head.weight")
}
