package importers

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// TestAdviceKeys: the plan script hands advise() the config's key behind
// each keyword it reads (keys=), as the file spells it: the Trainer's
// names, LLaMA-Factory's disable_gradient_checkpointing as the opposite
// bool ("!"), Axolotl's micro_batch_size for the Trainer's per-device
// batch (none when packing makes the micro-batch one row: no key says
// the rows), torchtune's, DeepSpeed's and torchtitan's job file's own
// names.
func TestAdviceKeys(t *testing.T) {
	const axolotl = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"attn_implementation: flash_attention_2\nbf16: true\ngradient_checkpointing: true\n"
	tune, err := os.ReadFile(filepath.Join("testdata", "torchtune", "llama3_1_8B_full_single_device.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	small := Options{Model: "c.json", ModelData: []byte(`{"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 32000}`)}
	const trainer = `"batch": "per_device_train_batch_size", "checkpoint": "gradient_checkpointing", "compile": "torch_compile", "grad_accum": "gradient_accumulation_steps"`
	for _, tc := range []struct {
		name, file, config string
		opts               Options
		want               string // keys=, "" for none
	}{
		{"TrainingArguments", "r.yaml", "model_name_or_path: Qwen/Qwen3-8B\nper_device_train_batch_size: 2\nbf16: true\nmax_length: 2048\ngradient_checkpointing: true\n", Options{}, "{" + trainer + "}"},
		{"LLaMA-Factory", "r.yaml", "model_name_or_path: Qwen/Qwen3-8B\nfinetuning_type: lora\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 4\ncutoff_len: 1024\nbf16: true\n", Options{},
			`{"batch": "per_device_train_batch_size", "checkpoint": "!disable_gradient_checkpointing", "compile": "torch_compile", "grad_accum": "gradient_accumulation_steps"}`},
		{"Axolotl unpacked", "r.yml", axolotl + "sample_packing: false\n", Options{},
			`{"batch": "micro_batch_size", "checkpoint": "gradient_checkpointing", "compile": "torch_compile", "grad_accum": "gradient_accumulation_steps"}`},
		{"Axolotl packed", "r.yml", axolotl + "sample_packing: true\n", Options{},
			`{"checkpoint": "gradient_checkpointing", "compile": "torch_compile", "grad_accum": "gradient_accumulation_steps"}`},
		{"torchtune", "r.yaml", string(tune), Options{},
			`{"batch": "batch_size", "checkpoint": "enable_activation_checkpointing", "compile": "compile", "grad_accum": "gradient_accumulation_steps"}`},
		{"DeepSpeed", "ds.json", `{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, "bf16": {"enabled": true}}`, small,
			`{"batch": "train_micro_batch_size_per_gpu", "grad_accum": "gradient_accumulation_steps"}`},
		{"torchtitan", "job.toml", "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\nseq_len = 1024\n", Options{},
			`{"batch": "training.local_batch_size"}`},
		{"TRL's GRPOConfig, vLLM colocated", "r.yaml", "model_name_or_path: Qwen/Qwen3-8B\nper_device_train_batch_size: 8\nuse_vllm: true\nmemsh.trainer: grpo\n", Options{},
			"{" + trainer + `, "preference": "vllm_enable_sleep_mode"}`},
		{"DeepSpeed's global batch alone", "ds.json", `{"train_batch_size": 8, "bf16": {"enabled": true}}`, small, ""},
	} {
		o := defaults(tc.opts)
		o.Top, o.Seq = 5, 1024
		res, err := Import(tc.file, []byte(tc.config), o)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := ""
		if m := regexp.MustCompile(`keys = (\{[^}]*\})`).FindStringSubmatch(res.Script); m != nil {
			got = m[1]
		}
		if got != tc.want {
			t.Errorf("%s: keys %s, want %s\n%s", tc.name, got, tc.want, res.Script)
		}
	}
}
