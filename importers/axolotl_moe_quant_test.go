package importers

import (
	"slices"
	"strings"
	"testing"
)

// TestAxolotlMoEQuant: quantize_moe_experts with qlora's 4-bit base is
// train(quant_experts = True) beside quant; Axolotl's own refusals
// (lora_target_linear, no quantized base) and what memsh does not model
// (its 8-bit parametrization) are config errors naming the key.
func TestAxolotlMoEQuant(t *testing.T) {
	const qlora = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 2\nsequence_len: 1024\nattn_implementation: flash_attention_2\nbf16: true\n" +
		"adapter: qlora\nload_in_4bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_modules: [q_proj, v_proj]\n"
	checkImportedScript(t, "qlora", qlora+"quantize_moe_experts: true\n", Options{}, []string{`quant = "nf4-dq",`, "quant_experts = True,"}, nil)
	checkImportedScript(t, "off", qlora+"quantize_moe_experts: false\n", Options{}, nil, []string{"quant_experts"})
	res, err := Import("r.yml", []byte(qlora+"quantize_moe_experts: true\nbnb_config_kwargs:\n  bnb_4bit_use_double_quant: false\n"), defaults(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(res.NotModelled, func(n string) bool { return strings.HasPrefix(n, "bnb_4bit_use_double_quant: the experts'") }) {
		t.Errorf("not modelled %v, want the experts' double quantization apart from the linears'", res.NotModelled)
	}
	const lora8 = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 2\nattn_implementation: flash_attention_2\n" +
		"adapter: lora\nload_in_8bit: true\nlora_r: 8\nlora_alpha: 16\nlora_target_modules: [q_proj, v_proj]\n"
	runErrorCases(t, []errorCase{
		{name: "8-bit experts", file: "r.yml", config: lora8 + "quantize_moe_experts: true\n",
			want: "r.yml:10: key quantize_moe_experts: not modelled with load_in_8bit: Axolotl's 8-bit parametrization of the experts (int8_vectorwise_dequant on access)", wantHint: "load_in_4bit"},
		{name: "beside lora_target_linear", file: "r.yml", config: qlora + "lora_target_linear: true\nquantize_moe_experts: true\n",
			want: "r.yml:12: key lora_target_linear: is not compatible with quantize_moe_experts", wantHint: "lora_target_modules"},
		{name: "no adapter", file: "r.yml", config: "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 2\nattn_implementation: flash_attention_2\nquantize_moe_experts: true\n",
			want: "r.yml:5: key quantize_moe_experts: requires an adapter and a quantized base", wantHint: "Axolotl refuses it too"},
	})
}
