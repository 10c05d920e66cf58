package sim

import (
	"encoding/json"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What residual_in_fp32 changes in what transformers' MambaForCausalLM
// saves in bf16 (sim/testdata/hf/mamba-tiny.json: hidden 32, 16 tokens a
// sample, the eager slow_forward), as tools/oracle/mamba_residual.py
// measures it (transformers 4.57.1, torch 2.15.0, on the CPU): the same
// step with residual_in_fp32 true minus false.
//
//	python mamba_residual.py ../../sim/testdata/hf/mamba-tiny.json LAYERS BATCH 16 CKPT
//
// The residual stream between blocks is fp32: norm_f normalizes it in fp32
// and keeps its fp32 normalized output for the weight's gradient (2 more
// bytes a value: 1,024 B a sample), and with gradient checkpointing every
// block but the first keeps an fp32 input (the first reads the bf16
// embeddings): 1,024 B more a sample and block.
func TestMambaResidualFP32AsTransformers(t *testing.T) {
	for _, tc := range []struct {
		layers, batch int
		ckpt          string
		want          int64
	}{
		{1, 1, "none", 1_024},
		{2, 2, "none", 2_048},
		{2, 1, "full", 2_048},
		{3, 2, "full", 6_144},
	} {
		var saved [2]int64
		for i, fp32 := range []bool{false, true} {
			var raw map[string]any
			if err := json.Unmarshal(readHF(t, "mamba-tiny.json"), &raw); err != nil {
				t.Fatal(err)
			}
			raw["num_hidden_layers"], raw["residual_in_fp32"] = tc.layers, fp32
			js, err := json.Marshal(raw)
			if err != nil {
				t.Fatal(err)
			}
			m, err := hf.FromConfig(js, "eager")
			if err != nil {
				t.Fatal(err)
			}
			p := tinyPlan(t, m)
			p.Batch, p.Seq = int64(tc.batch), 16
			if p.Checkpoint, err = core.ParseCheckpoint(tc.ckpt); err != nil {
				t.Fatal(err)
			}
			saved[i] = evalPlan(t, p).SavedActivations
		}
		if got := saved[1] - saved[0]; got != tc.want {
			t.Errorf("%d layers, batch %d, checkpoint %s: residual_in_fp32 adds %d saved bytes, transformers %d", tc.layers, tc.batch, tc.ckpt, got, tc.want)
		}
	}
}
