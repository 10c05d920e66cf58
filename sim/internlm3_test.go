package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// InternLM3's parameters on the meta device (transformers 5.25.0, which
// builds LlamaForCausalLM for model_type internlm3): internlm3-tiny.json
// 106,816 (64 wide, 4 heads of 16, 2 kv heads, MLP 128, vocab 256,
// untied; the biases named qkv_bias and bias, false);
// internlm3-8b.json 8,804,241,408, InternLM3Config's defaults (its
// docstring's "InternLM3-8B style configuration": 4096 wide, 48 layers,
// 32 heads of 128, 2 kv heads, MLP 10240, vocab 128512), written as
// internlm/internlm3-8b-instruct's config.json names its keys (the
// checkpoint's own count is not reachable from here; its card says "8
// billion parameter"):
//
//	AutoModelForCausalLM.from_config(InternLM3Config()) on the meta device
func TestInternLM3Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"internlm3-tiny.json": 106_816,
		"internlm3-8b.json":   8_804_241_408,
	})
}

// What InternLM3's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// internlm3-tiny.json (architectures LlamaForCausalLM, the class
// AutoModelForCausalLM builds; rope_scaling dynamic, which moves nothing
// at 32 tokens), 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/internlm3-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's layer.
func TestInternLM3SavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"internlm3-tiny.json", "fp32", "sdpa", 400_132, 680_196},
		{"internlm3-tiny.json", "fp32", "eager", 448_260, 776_452},
		{"internlm3-tiny.json", "bf16", "sdpa", 258_820, 416_004},
		{"internlm3-tiny.json", "bf16", "eager", 315_140, 528_644},
	})
}

// internlm3 under 5.23 is refused (5.22.2 has no models/internlm3);
// qkv_bias and bias (attribute_map's attention_bias and mlp_bias) true
// give 107,840 parameters in transformers 5.25.0 (q, k, v, o and the MLP
// biased), as do attention_bias and mlp_bias; qkv_bias alone is refused
// as InternLM3Config refuses it (StrictDataclassClassValidationError:
// "InternLM3 with `qkv_bias` different from `bias` is not supported"), as
// is hidden_size 66 over 4 heads (head_dim 16 set: "The hidden size (66)
// is not a multiple of the number of attention heads (4)"); the hub's
// InternLM3ForCausalLM is read as the causal LM.
func TestInternLM3Config(t *testing.T) {
	tiny := string(readHF(t, "internlm3-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.22.2"})
	var ue *units.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, `model_type "internlm3" needs transformers 5.23 or later`) || !strings.Contains(ue.Hint, "trust_remote_code") {
		t.Errorf("transformers 5.22.2: error %v, want one naming 5.23 and trust_remote_code", err)
	}
	both := strings.NewReplacer(`"qkv_bias": false`, `"qkv_bias": true`, `"bias": false`, `"bias": true`).Replace(tiny)
	named := strings.NewReplacer(`"qkv_bias": false`, `"attention_bias": true`, `"bias": false`, `"mlp_bias": true`).Replace(tiny)
	for what, cfg := range map[string]string{"qkv_bias and bias": both, "attention_bias and mlp_bias": named} {
		m, err := hf.FromConfig([]byte(cfg), "sdpa")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := m.Params(); got != 107_840 {
			t.Errorf("%s true: %d parameters, want 107,840", what, got)
		}
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"qkv_bias": false`, `"qkv_bias": true`, 1)), "sdpa")
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, `"qkv_bias" (attention_bias, true) and "bias" (mlp_bias, false) differ`) || ue.Hint == "" {
		t.Errorf("qkv_bias alone: error %v", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"hidden_size": 64`, `"hidden_size": 66`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"hidden_size" (66) is not a multiple of num_attention_heads (4): InternLM3Config refuses it`) {
		t.Errorf("hidden_size 66: error %v", err)
	}
	if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"LlamaForCausalLM"`, `"InternLM3ForCausalLM"`, 1)), "sdpa"); err != nil {
		t.Errorf("architectures InternLM3ForCausalLM: %v", err)
	}
}
