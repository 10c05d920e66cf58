package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// PEFT's LoRA on the Mamba-1 mixers' projections a Mamba model lets it
// adapt (x_proj, dt_proj; out_proj it refuses: TestLoRAMambaTargets):
// MambaForCausalLM trains through mamba_inner_fn, which reads
// x_proj.weight and dt_proj.weight itself, so their adapters exist and
// are never called (nn/mamba1.go, lowerFused: core.Builder.IdleAdapter);
// FalconMamba's mixer runs them as modules. The trainable counts, peft
// 0.21.2 and transformers 5.25.0 on the meta device
// (get_peft_model(cls(config), LoraConfig(r=4, lora_alpha=8,
// lora_dropout=0.0, target_modules=...)), summing the parameters that
// require grad), the same for mamba-tiny.json and falcon_mamba-tiny.json:
// in_proj and x_proj 1,872; x_proj and dt_proj 1,120; in_proj 1,280.
func TestLoRAMamba1TargetsAsPEFT(t *testing.T) {
	for _, config := range []string{"mamba-tiny.json", "falcon_mamba-tiny.json"} {
		m, err := hf.FromConfigOptions(readHF(t, config), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			targets   []string
			trainable int64
		}{
			{[]string{"in_proj", "x_proj"}, 1872},
			{[]string{"x_proj", "dt_proj"}, 1120},
			{[]string{"in_proj"}, 1280},
		} {
			name := config + " " + strings.Join(tc.targets, ",")
			prog, err := loraProgram(t, name, m, tc.targets, nil)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if trainable, _ := loraAdapted(prog); trainable != tc.trainable {
				t.Errorf("%s: %d trainable parameters, PEFT %d", name, trainable, tc.trainable)
			}
		}
	}
}
