package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// PEFT's target_parameters on an nn.Linear's weight (core's
// lora_param_linear.go): a ParamWrapper, unless a target module adapts
// the same linear, which PEFT refuses. llama-gqa-tiny.json, r=4,
// alpha=8, peft 0.21.2, transformers 5.25.0, on the meta device
// (get_peft_model(LlamaForCausalLM(config), LoraConfig(r=4, lora_alpha=8,
// lora_dropout=0.0, target_modules=..., target_parameters=...)), summing
// the trainable parameters):
//
//	["q_proj"] + ["o_proj.weight"]: 2,048 trainable
//	["q_proj"] + ["q_proj.weight"]: ValueError: Trying to wrap an `nn.Parameter` of layer 'model.layers.0.self_attn.q_proj' of type Linear, which is not a valid target
//	[] + ["mlp.down_proj.weight"]: 1,536 trainable
func TestLoRALinearParamTargetsAsPEFT(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "llama-gqa-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		targets, params []string
		trainable       int64
		refused         string
	}{
		{[]string{"q_proj"}, []string{"o_proj.weight"}, 2048, ""},
		{[]string{"q_proj"}, []string{"q_proj.weight"}, 0, "Trying to wrap an `nn.Parameter` of layer 'model.layers.0.self_attn.q_proj' of type Linear"},
		{nil, []string{"mlp.down_proj.weight"}, 1536, ""},
	} {
		name := strings.Join(tc.targets, ",") + " + " + strings.Join(tc.params, ",")
		prog, err := loraProgram(t, name, m, tc.targets, tc.params)
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%s: %v, want PEFT's refusal %q", name, err, tc.refused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if trainable, _ := loraAdapted(prog); trainable != tc.trainable {
			t.Errorf("%s: %d trainable parameters, PEFT %d", name, trainable, tc.trainable)
		}
	}
}
