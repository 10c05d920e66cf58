package importers

import (
	"strings"
	"testing"
)

// LLaMA-Factory's examples/train_lora/qwen3_lora_sft.yaml (at ff6d4d12e),
// shortened: TrainingArguments' per_device_train_batch_size would pick
// the hf importer, which would replay a full fine-tune without the LoRA,
// the cutoff and the gradient checkpointing LLaMA-Factory runs.
const llamaFactorySFT = `model_name_or_path: Qwen/Qwen3-4B-Instruct-2507
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
template: qwen3_nothink
cutoff_len: 2048
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
bf16: true
`

// An Axolotl QLoRA config in the shape of its examples (llama-3/qlora.yml).
const axolotlQLoRA = `base_model: NousResearch/Meta-Llama-3.1-8B
load_in_4bit: true
adapter: qlora
lora_r: 32
lora_target_linear: true
sequence_len: 4096
sample_packing: true
micro_batch_size: 2
gradient_accumulation_steps: 4
optimizer: paged_adamw_8bit
`

func TestUnreadTrainers(t *testing.T) {
	runErrorCases(t, []errorCase{
		{name: "LLaMA-Factory's LoRA SFT", file: "qwen3_lora_sft.yaml", config: llamaFactorySFT,
			want:     "qwen3_lora_sft.yaml:4: LLaMA-Factory's config (keys finetuning_type, lora_target, cutoff_len, template): memsh check does not read LLaMA-Factory's configs yet",
			wantHint: "finetuning_type: LoRA by default"},
		{name: "LLaMA-Factory's full fine-tune in JSON, known by its cutoff", file: "full.json",
			config: `{"model_name_or_path": "x", "per_device_train_batch_size": 1, "cutoff_len": 1024}`,
			want:   "full.json: LLaMA-Factory's config (keys cutoff_len): memsh check does not read LLaMA-Factory's configs yet", wantHint: "hf_config"},
		{name: "Axolotl's QLoRA", file: "qlora.yml", config: axolotlQLoRA,
			want:     "qlora.yml:8: Axolotl's config (keys micro_batch_size, sequence_len, adapter): memsh check does not read Axolotl's configs yet",
			wantHint: "lora_target_linear"},
		// Without base_model, Axolotl's keys alone tell no trainer.
		{name: "Axolotl's keys without base_model", file: "r.yaml", config: "micro_batch_size: 2\nsequence_len: 512\n",
			want: "r.yaml: not a config memsh check knows", wantHint: "--trainer"},
	})
}

// --trainer hf reads a LLaMA-Factory file as TrainingArguments, as asked:
// its own keys are then listed as not understood.
func TestUnreadTrainerNamed(t *testing.T) {
	res, err := Import("qwen3_lora_sft.yaml", []byte(llamaFactorySFT), defaults(Options{Trainer: "hf", Seq: 2048, Model: "config.json"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Unknown, ", "); !strings.Contains(got, "finetuning_type") || !strings.Contains(got, "lora_target") {
		t.Errorf("not understood: %s, want LLaMA-Factory's keys among them", got)
	}
}
