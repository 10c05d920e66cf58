package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Sarvam MLA's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, loaded by from_pretrained):
// sarvam_mla-tiny.json (SarvamMLAConfig, built as DeepseekV3ForCausalLM;
// the original checkpoints' names num_experts and num_shared_experts and
// their head_dim, which __post_init__ drops; 64 wide, 4 heads, a kv latent
// of 16, q projected whole (q_lora_rank left out: the class's None), nope
// 8, rope 4, v 12 (equal widths: the CPU's SDPA takes its flash kernel, as
// CUDA's fused kernels do, not the math path unequal widths send it to);
// layer 0 dense of 96, layers 1 and 2 of 4 experts of 32, 2 a token, one
// shared), 2 samples of 32 tokens, at 1, 2 and 3 layers,
// sdpa (the latent-attention families run no eager path), the experts as
// grouped_mm (the default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/sarvam_mla-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32
//
// The harness's kept bytes (DeepSeek-V3's router saves 1,792 B more a MoE
// layer on its selection's branch, which dies with the forward).
// param_bytes and grad_bytes at 3 layers: 493,504 in fp32 (123,376
// parameters), 247,776 in bf16 (the two routers' 512 weights kept fp32).
func TestSarvamMLASavesAsTransformers(t *testing.T) {
	checkSavedDepths(t, "sarvam_mla-tiny.json", []savedDepths{
		{"fp32", "sdpa", [3]int64{365_572, 718_868, 1_072_164}},
		{"bf16", "sdpa", [3]int64{226_820, 441_876, 656_932}},
	})
}

// The same with the experts as transformers' eager loop
// (experts_implementation "eager"), fp32:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/sarvam_mla-tiny.json {2,3} 2 32 float32 sdpa nocache keepfp32 eagerexperts
//
// keeps 848,900 and 1,332,228 bytes, less the views the loop takes of
// gate_up_proj and down_proj, which the harness counts (4 x 64 x 64 + 4 x
// 64 x 32 elements an MoE layer; TestFlexOlmoExpertsAsTransformers).
func TestSarvamMLAEagerExpertsAsTransformers(t *testing.T) {
	checkEagerExpertsSaved(t, "sarvam_mla-tiny.json", 2, 1, 4*64*64+4*64*32, []eagerSaved{{"fp32", []int64{848_900, 1_332_228}}})
}

// The parameters: sarvam_mla-tiny.json 123,376 (the harness's fp32
// param_bytes / 4); SarvamMLAConfig()'s defaults 106,031,763,456 (32
// layers of 4096, 64 heads, q projected whole, 128 experts of 2048, 8 a
// token, one shared, one dense layer of 16,384, 262,144 untied
// embeddings: the "105B"), every key memsh does not ask for left out, on
// the meta device, transformers 5.25.0:
//
//	python -c "import torch, transformers as t; torch.set_default_device('meta'); print(sum(p.numel() for p in t.AutoModelForCausalLM.from_config(t.SarvamMLAConfig()).parameters()))"
//
// A config.json naming the remote code's class builds the causal LM, as
// transformers' AutoModelForCausalLM does.
func TestSarvamMLAParams(t *testing.T) {
	checkParams(t, map[string]int64{"sarvam_mla-tiny.json": 123_376})
	m, err := hf.FromConfig([]byte(`{"model_type": "sarvam_mla", "architectures": ["SarvamMLAForCausalLM"], "vocab_size": 262144,
 "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 64}`), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 106_031_763_456 {
		t.Errorf("SarvamMLAConfig's defaults: %d parameters, want 106,031,763,456", got)
	}
}

// sarvam_mla under 5.23.0 is refused (the 5.24.0 wheel is the first with
// models/sarvam_mla); a key under both its names is refused naming
// SarvamMLAConfig; eager attention is refused as for DeepSeek-V3; the
// names are transformers' (DeepseekV3ForCausalLM's).
func TestSarvamMLAConfig(t *testing.T) {
	tiny := string(readHF(t, "sarvam_mla-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.23.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "sarvam_mla" needs transformers 5.24 or later`) {
		t.Errorf("transformers 5.23.0: error %v, want one naming 5.24", err)
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.24.0"}); err != nil {
		t.Errorf("transformers 5.24.0: %v", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "eager"); err == nil {
		t.Error("eager: no error, want the latent attention's refusal")
	}
	for _, tc := range []struct{ name, to, want string }{
		{"both expert counts", `"num_experts": 4, "n_routed_experts": 4,`, `"num_experts" and "n_routed_experts" are both set: SarvamMLAConfig reads`},
		{"both shared counts", `"num_experts": 4, "n_shared_experts": 1,`, `"num_shared_experts" and "n_shared_experts" are both set`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, `"num_experts": 4,`, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %s", tc.name, err, tc.want)
		}
	}
	checkHasParams(t, tiny, "model.layers.1.mlp.gate.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.2.mlp.shared_experts.down_proj.weight",
		"model.layers.0.mlp.gate_proj.weight", "model.layers.0.self_attn.q_proj.weight",
		"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", "lm_head.weight")
}
