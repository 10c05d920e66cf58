package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// PEFT's LoRA all-linear (r=4, alpha=8, fp32 adapters) on the Mamba-2
// hybrids PEFT does not refuse (Bamba, Zamba2), against transformers
// 5.25.0, peft 0.21.2 and PyTorch 2.15.0 on the CPU with the mamba_ssm
// kernel's node standing in for the kernel (tools/oracle/mamba2_kernel_saved.py),
// 2 samples of 32 tokens:
//
//	python tools/oracle/mamba2_kernel_saved.py sim/testdata/hf/bamba-tiny.json {2,3} 2 32 {float32,bfloat16} sdpa nocache lora=all-linear
//	python tools/oracle/mamba2_kernel_saved.py sim/testdata/hf/zamba2-tiny.json 4 2 32 {float32,bfloat16} sdpa nocache lora=all-linear
//
// Bamba: saved 583,460 / 860,740 bytes in fp32, 495,396 / 697,924 in bf16,
// gradients 28,288 / 41,728; Zamba2 (4 layers): saved 1,736,836 in fp32,
// 1,847,428 in bf16, gradients 147,456. The kernel reads
// self.out_proj.weight, so out_proj's adapter is never called: counted
// as trainable, no gradient (core.Builder.IdleAdapter in nn/mamba2.go);
// so are Zamba2's adapters on the adapter_list entries of the other
// calls of a layer's block (nn/zamba2_adapter.go, idleRankAdapters).
func TestLoRAMamba2HybridsAsPEFT(t *testing.T) {
	bamba := func(layers int64) map[string]any {
		var idx []any
		if layers > 1 {
			idx = []any{1}
		}
		return map[string]any{"attn_layer_indices": idx}
	}
	for _, tc := range []struct {
		config, precision string
		layers            int64
		saved, grads      int64
	}{
		{"bamba-tiny.json", "fp32", 2, 583460, 28288},
		{"bamba-tiny.json", "fp32", 3, 860740, 41728},
		{"bamba-tiny.json", "bf16", 2, 495396, 28288},
		{"bamba-tiny.json", "bf16", 3, 697924, 41728},
		{"zamba2-tiny.json", "fp32", 4, 1736836, 147456},
		{"zamba2-tiny.json", "bf16", 4, 1847428, 147456},
	} {
		var raw []byte
		if tc.config == "bamba-tiny.json" {
			raw = ropeConfig(t, tc.config, tc.layers, bamba(tc.layers))
		} else {
			raw = zamba2Config(t, tc.config, tc.layers, nil)
		}
		p := hfOraclePlan(t, raw, hf.Options{Attn: "sdpa"}, tc.precision)
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
		rep := evalPlan(t, p)
		if got := rep.SavedActivations; got != tc.saved {
			t.Errorf("%s %s, %d layers: memsh keeps %d bytes, PEFT %d (%+d)", tc.config, tc.precision, tc.layers, got, tc.saved, got-tc.saved)
		}
		if got := rep.States.Grads; got != tc.grads {
			t.Errorf("%s %s, %d layers: %d bytes of gradients, PEFT %d (%+d)", tc.config, tc.precision, tc.layers, got, tc.grads, got-tc.grads)
		}
	}
}
