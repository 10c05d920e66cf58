package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// EXAONE 3.x's parameters on the meta device (transformers 5.25.0, which
// builds LlamaForCausalLM for model_type exaone): exaone-tiny.json 106,816
// (64 wide, 4 heads of 16, 2 kv heads, MLP 128, untied);
// exaone-3.0-7.8b.json 7,818,448,896, ExaoneConfig's defaults (its
// docstring's "EXAONE-3.0-7.8B style configuration": 4096 wide, 32
// layers, 32 heads, 8 kv heads, MLP 14336, vocab 102400, untied) written
// with the keys EXAONE's config.json uses (num_layers,
// activation_function, layer_norm_epsilon), the card's 7.8B.
func TestExaoneParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"exaone-tiny.json":     106_816,
		"exaone-3.0-7.8b.json": 7_818_448_896,
	})
}

// What EXAONE 3.x's decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// exaone-tiny.json (architectures LlamaForCausalLM, the class
// AutoModelForCausalLM builds), 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/exaone-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Llama's layer.
func TestExaoneSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"exaone-tiny.json", "fp32", "sdpa", 400_132, 680_196},
		{"exaone-tiny.json", "fp32", "eager", 448_260, 776_452},
		{"exaone-tiny.json", "bf16", "sdpa", 258_820, 416_004},
		{"exaone-tiny.json", "bf16", "eager", 315_140, 528_644},
	})
}

// exaone under 5.24 is refused (5.23.0 has no models/exaone: older
// releases load EXAONE 3.x only with trust_remote_code); ExaoneConfig's
// attribute_map keys are read as Llama's (num_layers: the layers built),
// and one given with its Llama key is refused naming both; the hub's
// ExaoneForCausalLM is read as the causal LM.
func TestExaoneConfig(t *testing.T) {
	tiny := string(readHF(t, "exaone-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.23.0"})
	var ue *units.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, `model_type "exaone" needs transformers 5.24 or later`) || !strings.Contains(ue.Hint, "trust_remote_code") {
		t.Errorf("transformers 5.23.0: error %v, want one naming 5.24 and trust_remote_code", err)
	}
	one, err := hf.FromConfig([]byte(strings.Replace(tiny, `"num_hidden_layers": 2`, `"num_layers": 1`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := one.Params(), int64(106_816-(2*64*64+2*64*32+3*64*128+2*64)); got != want {
		t.Errorf("num_layers 1: %d parameters, want %d (one layer)", got, want)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"num_hidden_layers": 2`, `"num_hidden_layers": 2, "num_layers": 2`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"num_layers" and "num_hidden_layers" are both set`) {
		t.Errorf("num_layers beside num_hidden_layers: error %v", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"activation_function": "silu"`, `"activation_function": "swish2"`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), "swish2") {
		t.Errorf("activation_function swish2: error %v", err)
	}
	if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"LlamaForCausalLM"`, `"ExaoneForCausalLM"`, 1)), "sdpa"); err != nil {
		t.Errorf("architectures ExaoneForCausalLM: %v", err)
	}
}
