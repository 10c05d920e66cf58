package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// IQuest-Coder-V1's parameters on the meta device (transformers 5.25.0,
// which builds LlamaForCausalLM for model_type iquestcoder):
// iquestcoder-tiny.json 106,816 (64 wide, 4 heads of 16, 2 kv heads, MLP
// 128, vocab 256, untied); iquestcoder-v1-40b.json 39,794,283,520,
// IQuestCoderConfig's defaults (its docstring's "IQuest-Coder-V1-40B
// style configuration": 5120 wide, 80 layers, 40 heads of 128, 8 kv
// heads, MLP 27648, vocab 76800; the checkpoint's own count is not
// reachable from here):
//
//	AutoModelForCausalLM.from_config(IQuestCoderConfig()) on the meta device
func TestIQuestCoderParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"iquestcoder-tiny.json":   106_816,
		"iquestcoder-v1-40b.json": 39_794_283_520,
	})
}

// What IQuest-Coder's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// iquestcoder-tiny.json (architectures LlamaForCausalLM, the class
// AutoModelForCausalLM builds), 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/iquestcoder-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's layer.
func TestIQuestCoderSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"iquestcoder-tiny.json", "fp32", "sdpa", 400_132, 680_196},
		{"iquestcoder-tiny.json", "fp32", "eager", 448_260, 776_452},
		{"iquestcoder-tiny.json", "bf16", "sdpa", 258_820, 416_004},
		{"iquestcoder-tiny.json", "bf16", "eager", 315_140, 528_644},
	})
}

// iquestcoder under 5.23 is refused (5.22.2 has no models/iquestcoder);
// in transformers 5.25.0 attention_bias gives 107,200 parameters and
// mlp_bias 107,456 (Llama's, each on its own); clip_qkv 8 and
// use_sliding_window true are refused as IQuestCoderConfig refuses them
// (StrictDataclassClassValidationError: "IQuestCoder does not support
// `clip_qkv`", "... `use_sliding_window`"), clip_qkv null and
// use_sliding_window false build 106,816; hidden_size 66 over 4 heads is
// refused ("The hidden size (66) is not a multiple of the number of
// attention heads (4)"); the hub's IQuestCoderForCausalLM is read as the
// causal LM.
func TestIQuestCoderConfig(t *testing.T) {
	tiny := string(readHF(t, "iquestcoder-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.22.2"})
	var ue *units.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, `model_type "iquestcoder" needs transformers 5.23 or later`) || !strings.Contains(ue.Hint, "trust_remote_code") {
		t.Errorf("transformers 5.22.2: error %v, want one naming 5.23 and trust_remote_code", err)
	}
	for key, want := range map[string]int64{"attention_bias": 107_200, "mlp_bias": 107_456} {
		m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"`+key+`": false`, `"`+key+`": true`, 1)), "sdpa")
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if got := m.Params(); got != want {
			t.Errorf("%s true: %d parameters, want %d", key, got, want)
		}
	}
	for _, tc := range []struct{ set, err string }{
		{`"clip_qkv": 8`, `"clip_qkv" is set (8): IQuestCoderConfig refuses it`},
		{`"use_sliding_window": true`, `"use_sliding_window" is true: IQuestCoderConfig refuses it`},
		{`"clip_qkv": null`, ""},
		{`"use_sliding_window": false`, ""},
		{`"hidden_size": 66`, `"hidden_size" (66) is not a multiple of num_attention_heads (4): IQuestCoderConfig refuses it`},
	} {
		cfg := strings.Replace(tiny, `"model_type"`, tc.set+`, "model_type"`, 1)
		if strings.HasPrefix(tc.set, `"hidden_size"`) {
			cfg = strings.Replace(tiny, `"hidden_size": 64`, tc.set, 1)
		}
		m, err := hf.FromConfig([]byte(cfg), "sdpa")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.set, err)
		case tc.err == "" && m.Params() != 106_816:
			t.Errorf("%s: %d parameters, want 106,816", tc.set, m.Params())
		case tc.err != "" && (!errors.As(err, &ue) || !strings.Contains(ue.Msg, tc.err)):
			t.Errorf("%s: error %v, want %q", tc.set, err, tc.err)
		}
	}
	if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"LlamaForCausalLM"`, `"IQuestCoderForCausalLM"`, 1)), "sdpa"); err != nil {
		t.Errorf("architectures IQuestCoderForCausalLM: %v", err)
	}
}
