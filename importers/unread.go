package importers

import (
	"fmt"
	"slices"
	"strings"
)

// unreadTrainer is a trainer whose configs memsh check recognises but does
// not read: its files share a format, and some keys, with one it reads
// (a LLaMA-Factory YAML is TrainingArguments plus its own model and
// fine-tuning arguments), and read as that one they would give a plan
// without what the trainer's own keys do (its LoRA, quantization and
// gradient checkpointing): a wrong verdict. Such a file is refused.
type unreadTrainer struct {
	name string
	exts []string
	// keys tell the trainer's files: one of them present, and every key
	// of requires.
	keys, requires []string
	what           string // what a plan read another way would miss
}

// unreadTrainers are the trainers memsh check refuses by name.
var unreadTrainers = []unreadTrainer{{
	// Axolotl's AxolotlInputConfig (src/axolotl/utils/schemas/config.py
	// at 067b021c8): base_model, micro_batch_size, sequence_len, adapter.
	name:     "Axolotl",
	exts:     []string{".yaml", ".yml", ".json"},
	keys:     []string{"micro_batch_size", "sequence_len", "adapter", "datasets"},
	requires: []string{"base_model"},
	what:     "its adapter (lora or qlora) and lora_target_linear, load_in_4bit, sequence_len and sample_packing, micro_batch_size and gradient_checkpointing",
}}

// unread refuses t when it is the config of a trainer memsh check does
// not read.
func unread(t *tree, ext string) error {
	for _, u := range unreadTrainers {
		if !slices.Contains(u.exts, ext) || !t.hasAll(u.requires) {
			continue
		}
		var found []string
		for _, k := range u.keys {
			if _, ok := t.leaves[k]; ok {
				found = append(found, k)
			}
		}
		if len(found) == 0 {
			continue
		}
		return &Error{File: t.file, Line: t.leaves[found[0]].line,
			Msg: fmt.Sprintf("%s's config (keys %s): memsh check does not read %s's configs yet", u.name, strings.Join(found, ", "), u.name),
			Hint: fmt.Sprintf("read as another trainer's, the plan would miss %s: write the plan in Starlark (hf_config(\"config.json\"), "+
				"train(lora = lora(...), quant = ..., checkpoint = ...): docs/check.md), or --trainer NAME to read it as that trainer's anyway", u.what)}
	}
	return nil
}

// hasAll says whether every key is in the config.
func (t *tree) hasAll(keys []string) bool {
	for _, k := range keys {
		if _, ok := t.leaves[k]; !ok {
			return false
		}
	}
	return true
}
