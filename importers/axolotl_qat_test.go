package importers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Axolotl's QAT example on Llama 3.2 3B (testdata/README.md names its
// commit): int8 activations and int4 weights in groups of 32 are
// qat="int8-int4"; Liger's fused linear cross-entropy reads lm_head's
// weight without calling the swapped module, so qat_head=False. Liger's
// LayerNorm kernel, which memsh refuses, is off (Llama has no LayerNorm).
func TestAxolotlQAT(t *testing.T) {
	runImportCases(t, []importCase{{
		name: "Llama 3.2 3B QAT under FSDP2",
		file: "axolotl/llama3_2_3b_qat_fsdp2.yaml",
		step: axolotlStep(16, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"liger_layer_norm=false"}},
		notModelled: []string{
			"sequence_len: unpacked rows are padded to the batch's longest, at most 8192 tokens: memsh replays rows of 8192 (--seq N for another length)",
			axolotlTokensNote,
			"liger_rope: Liger's RoPE kernel (in place on copies of q and k: transients only)",
		},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3.2-3b", attn = "flash"), batch = 16, seq = 8192, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", loss_chunks = "liger", qat = "int8-int4", qat_group_size = 32, qat_head = False, liger_kernels = True,
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2))`,
	}, {
		// without Liger's fused loss the model calls the swapped lm_head
		name: "Llama 3.2 3B QAT, transformers' loss",
		file: "axolotl/llama3_2_3b_qat_fsdp2.yaml",
		step: axolotlStep(16, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"plugins=null", "liger_rope=null", "liger_rms_norm=null", "liger_glu_activation=null",
			"liger_layer_norm=null", "liger_fused_linear_cross_entropy=null"}},
		notModelled: []string{
			"sequence_len: unpacked rows are padded to the batch's longest, at most 8192 tokens: memsh replays rows of 8192 (--seq N for another length)",
			axolotlTokensNote,
		},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3.2-3b", attn = "flash"), batch = 16, seq = 8192, precision = "bf16", optimizer = adamw(fused = True),
             checkpoint = "full", qat = "int8-int4", qat_group_size = 32,
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2))`,
	}})
}

// What Axolotl's qat: block may say that memsh does not replay, each a
// config error naming the key.
func TestAxolotlQATErrors(t *testing.T) {
	nvfp4, err := os.ReadFile(filepath.Join("testdata", "axolotl", "llama3_2_3b_qat_nvfp4.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nattn_implementation: flash_attention_2\nbf16: true\n"
	o := Options{Model: "config.json"}
	runErrorCases(t, []errorCase{
		{name: "NVFP4 (Axolotl's example)", file: "r.yml", config: strings.Replace(string(nvfp4), "liger_layer_norm: true", "liger_layer_norm: false", 1),
			want: "r.yml:31: key qat.activation_dtype: not modelled: NVFP4 and MXFP4 fake quantization (torchao's prototype mx_formats)", wantHint: "int8, weight_dtype: int4"},
		{name: "int8 weights only", file: "r.yml", config: base + "qat:\n  weight_dtype: int8\n", opts: o,
			want: "r.yml:7: key qat.weight_dtype: activation_dtype None with weight_dtype int8 is a combination torchao's QAT does not support", wantHint: "Axolotl raises the same"},
		{name: "float8", file: "r.yml", config: base + "qat:\n  activation_dtype: float8_e4m3fn\n  weight_dtype: float8_e4m3fn\n", opts: o,
			want: "r.yml:8: key qat.weight_dtype: not modelled: activation_dtype float8_e4m3fn with weight_dtype float8_e4m3fn", wantHint: "int4 is modelled"},
		{name: "the embedding", file: "r.yml", config: base + "qat:\n  activation_dtype: int8\n  weight_dtype: int4\n  quantize_embedding: true\n", opts: o,
			want: "r.yml:9: key qat.quantize_embedding: not modelled: the embedding's fake-quantized weight", wantHint: "drop it"},
		{name: "an adapter", file: "r.yml", config: base + "adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nqat:\n  activation_dtype: int8\n  weight_dtype: int4\n", opts: o,
			want: "r.yml: key qat: not modelled with adapter lora: Axolotl swaps every linear before PEFT wraps them", wantHint: "QAT-LoRA"},
	})
}
