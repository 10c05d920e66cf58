package importers

import (
	"strings"
	"testing"
)

// TestHFZooNames: the Hub names the trainers' examples give
// model_name_or_path (base_model) for the zoo's models, each to the zoo
// model of its shapes (Axolotl's examples/mistral/dpo/mistral-dpo-qlora.yml
// at 067b021c8 names Mistral-7B-Instruct-v0.2, which said the zoo has no
// model for it though docs/check.md lists Mistral 7B v0.1-v0.3).
func TestHFZooNames(t *testing.T) {
	for _, tc := range []struct{ name, model string }{
		{"mistralai/Mistral-7B-v0.1", `mistral("7b", attn = "sdpa")`},
		{"mistralai/Mistral-7B-Instruct-v0.2", `mistral("7b", attn = "sdpa")`},
		{"mistralai/Mistral-7B-Instruct-v0.3", `mistral("7b-v0.3", attn = "sdpa")`},
		{"meta-llama/Llama-3.2-1B-Instruct", `llama("llama3.2-1b", attn = "sdpa")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := `{"per_device_train_batch_size": 1, "gradient_checkpointing": true, "model_name_or_path": "` + tc.name + `"}`
			res, err := Import("args.json", []byte(args), defaults(Options{Seq: 512}))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Script, tc.model+",\n") {
				t.Errorf("want %s in\n%s", tc.model, res.Script)
			}
		})
	}
}
