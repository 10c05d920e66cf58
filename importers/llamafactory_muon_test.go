package importers

import (
	"strings"
	"testing"
)

// LLaMA-Factory's Muon example (examples/extras/muon, testdata/README.md
// names its commit): use_muon is its copy of K. Jordan's Muon with its
// AdamW, one parameter at a time.
func TestLlamaFactoryMuon(t *testing.T) {
	runImportCases(t, []importCase{{
		name:        "Qwen2 1.5B full SFT with Muon",
		file:        "llamafactory/qwen2_full_sft_muon.yaml",
		step:        hfStep(1, 8, 1, 2048),
		notModelled: []string{llamaFactoryCutoff},
		hand: `load("@stdlib//llm.star", "qwen2")
plan = train(qwen2("1.5b", attn = "sdpa"), batch = 1, seq = 2048, grad_accum = 8, precision = "bf16-mixed",
             optimizer = muon(newton_schulz = "reference", impl = "for-loop"), checkpoint = checkpoint("full", reentrant = True), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		// LoRA+ builds its optimizer first: use_muon changes nothing
		name: "Muon under LoRA+",
		file: "llamafactory/qwen2_full_sft_muon.yaml",
		step: hfStep(1, 8, 1, 2048),
		opts: Options{Overrides: []string{"loraplus_lr_ratio=16.0"}},
		notModelled: []string{llamaFactoryCutoff,
			"use_muon: loraplus_lr_ratio is set, and LLaMA-Factory builds LoRA+'s optimizer before it reads use_muon (create_custom_optimizer): the run steps with optim's"},
		hand: `load("@stdlib//llm.star", "qwen2")
plan = train(qwen2("1.5b", attn = "sdpa"), batch = 1, seq = 2048, grad_accum = 8, precision = "bf16-mixed",
             optimizer = adamw(fused = True), checkpoint = checkpoint("full", reentrant = True), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}})
	// use_muon must be a bool, as LLaMA-Factory's dataclass says
	_, err := Import("r.yaml", []byte("model_name_or_path: Qwen/Qwen2-1.5B-Instruct\nstage: sft\nfinetuning_type: full\nuse_muon: sometimes\n"), defaults(Options{}))
	if err == nil || !strings.Contains(err.Error(), "use_muon") {
		t.Errorf("use_muon: sometimes: error %v, want one at the key", err)
	}
}
