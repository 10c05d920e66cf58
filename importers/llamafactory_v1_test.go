package importers

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLlamaFactoryV1: LLaMA-Factory's v1 examples (examples/v1 at
// ff6d4d12e, saved whole) are refused, as v1 runs its own trainer, not
// transformers' Trainer that the v0 reading follows; the hint is the
// plan to write, from the file's values (micro_batch_size, cutoff_len,
// activation checkpointing on by default, peft_config's LoRA on every
// linear layer, quant_config's bitsandbytes nf4 with double quantization
// and its storage in compute_dtype, dist_config's fsdp2), and that plan
// runs where memsh replays it (GPUS being the job's GPUs; bitsandbytes'
// 4-bit weights under FSDP2 memsh refuses with its own hint).
func TestLlamaFactoryV1(t *testing.T) {
	const lora = `lora = lora(rank = 16, alpha = 32, dropout = 0.05, targets = ["all-linear"])`
	for _, tc := range []struct {
		file, plan string
		runs       bool
	}{
		{"train_lora_sft.yaml", `train(hf_config("Qwen/Qwen3-4B/config.json"), batch = 1, seq = 2048, checkpoint = "full", ` + lora + `, parallel = parallel(dp = GPUS, fsdp = 2))`, true},
		{"train_full_fsdp2.yaml", `train(hf_config("Qwen/Qwen3-0.6B/config.json"), batch = 1, seq = 2048, checkpoint = "full", parallel = parallel(dp = GPUS, fsdp = 2))`, true},
		{"quantization.yaml", `train(hf_config("Qwen/Qwen3-0.6B/config.json"), batch = 1, seq = 2048, checkpoint = "full", ` + lora +
			`, quant = "nf4-dq", quant_storage = "fp16", parallel = parallel(dp = GPUS, fsdp = 2))`, false},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", "llamafactory", "v1", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		_, err = Import(tc.file, data, defaults(Options{}))
		var ie *Error
		if !errors.As(err, &ie) || ie.Key != "model" || !strings.Contains(ie.Msg, "v1 trains with its own trainer") {
			t.Fatalf("%s: %v, want the v1 refusal", tc.file, err)
		}
		if !strings.HasPrefix(ie.Hint, "write the plan in Starlark from its keys, "+tc.plan+", ") {
			t.Errorf("%s: hint %q, want the plan %s", tc.file, ie.Hint, tc.plan)
		}
		if !tc.runs {
			continue
		}
		model := regexp.MustCompile(`hf_config\("([^"]+)"\)`).FindStringSubmatch(tc.plan)[1]
		g := runScript(t, "plan.star", "GPUS = 2\nplan = "+tc.plan+"\nfits = simulate(plan).fits\n", map[string]string{model: "../../sim/testdata/hf/qwen3-8b.json"})
		if g["fits"] == nil {
			t.Errorf("%s: the hint's plan did not run", tc.file)
		}
	}
}
