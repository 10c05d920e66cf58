package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestGptOssNoSDPA: GptOssPreTrainedModel sets _supports_sdpa = False
// (transformers 5.25.0 modeling_gpt_oss.py l.378; 4.57.6 l.399), so
// transformers' default load runs eager attention with the sinks' column,
// and memsh's attn="sdpa" (hf_config's default) does too: the same step
// as attn="eager", not a fused kernel.
func TestGptOssNoSDPA(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "hf", "gpt_oss-tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	peak := map[string]int64{}
	for _, attn := range []string{"sdpa", "eager", "flash"} {
		m, err := hf.FromConfigOptions(data, hf.Options{Attn: attn})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Seq = 128
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		peak[attn] = r.PeakAllocated
	}
	if peak["sdpa"] != peak["eager"] || peak["flash"] == peak["eager"] {
		t.Errorf("peak allocated sdpa %d, eager %d, flash %d: sdpa must run eager, flash its own kernel", peak["sdpa"], peak["eager"], peak["flash"])
	}
}
