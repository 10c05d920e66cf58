package importers

import "testing"

// TestAxolotlSwanLab: SwanLab's plugin logs and nothing else: its keys
// change nothing replayed, and a config listing it reads as without it.
func TestAxolotlSwanLab(t *testing.T) {
	const base = "base_model: NousResearch/Meta-Llama-3-8B\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\nsequence_len: 2048\n" +
		"adapter: lora\nlora_r: 8\nlora_alpha: 16\nlora_target_linear: true\nattn_implementation: flash_attention_2\nbf16: true\n"
	const swan = "plugins:\n  - axolotl.integrations.swanlab.SwanLabPlugin\nuse_swanlab: true\nswanlab_project: p\nswanlab_mode: offline\nswanlab_log_completions: true\n"
	plain, err := Import("r.yml", []byte(base), defaults(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	logged, err := Import("r.yml", []byte(base+swan), defaults(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	if plain.Script != logged.Script {
		t.Errorf("with SwanLab's plugin:\n%s\nwithout:\n%s", logged.Script, plain.Script)
	}
}
