package importers

import (
	"strings"
	"testing"
)

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
		{name: "Axolotl's QLoRA", file: "qlora.yml", config: axolotlQLoRA,
			want:     "qlora.yml:8: Axolotl's config (keys micro_batch_size, sequence_len, adapter): memsh check does not read Axolotl's configs yet",
			wantHint: "lora_target_linear"},
		// Without base_model, Axolotl's keys alone tell no trainer.
		{name: "Axolotl's keys without base_model", file: "r.yaml", config: "micro_batch_size: 2\nsequence_len: 512\n",
			want: "r.yaml: not a config memsh check knows", wantHint: "--trainer"},
	})
}

// --trainer hf reads an Axolotl file as TrainingArguments, as asked: its
// own keys are then listed as not understood.
func TestUnreadTrainerNamed(t *testing.T) {
	res, err := Import("qlora.yml", []byte(axolotlQLoRA+"model_name_or_path: meta-llama/Meta-Llama-3-8B\nper_device_train_batch_size: 2\ngradient_checkpointing: true\n"),
		defaults(Options{Trainer: "hf", Seq: 2048}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Unknown, ", "); !strings.Contains(got, "adapter") || !strings.Contains(got, "lora_target_linear") {
		t.Errorf("not understood: %s, want Axolotl's keys among them", got)
	}
}
