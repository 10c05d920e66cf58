package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestTRLSFTHeadSavedAsTRL: what autograd keeps for backward in one step
// of a tiny Llama (llama-gqa-tiny.json, 2 layers, 64 tokens, sdpa) under
// TRL's fused LM head as SFTTrainer runs it (loss_chunks="trl"), measured
// on the CPU with torch 2.15.0, transformers 5.25.0, trl 1.16.0 (/work/venv-t),
// add_fused_lm_head's compact branch forced as on CUDA:
//
//	python tools/oracle/trl_sft_head.py sim/testdata/hf/llama-gqa-tiny.json 2 BATCH 64 DTYPE sdpa
//
// "kept": 352,951 (bf16, 1 row), 701,798 (bf16, 2 rows), 1,229,926 (fp32,
// 2 rows); the model's own loss (plain) keeps 418,060, 832,004 and
// 1,360,388, which memsh matches too. memsh counted nonzero's int64 [n, 2]
// as IndexBackward0's saved indices (+1,008 and +2,016 bytes): autograd
// saves the bool mask as given (derivatives.yaml, index.Tensor), which
// masked_scatter saves already; and it missed the int64 token count the
// loss divides by (-8). With the first 16 labels of each row -100 (prompt=16,
// a completion-only loss) TRL keeps 697,478: memsh scores every position,
// an upper bound.
func TestTRLSFTHeadSavedAsTRL(t *testing.T) {
	for _, tc := range []struct {
		dtype               string
		batch, saved, plain int64
	}{
		{"bf16", 1, 352_951, 418_060},
		{"bf16", 2, 701_798, 832_004},
		{"fp32", 2, 1_229_926, 1_360_388},
	} {
		m, err := hf.FromConfigOptions(ropeConfig(t, "llama-gqa-tiny.json", 2, nil), hf.Options{Attn: "sdpa", Transformers: "5.25.0"})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		prec, err := core.LookupPrecision(tc.dtype)
		if err != nil {
			t.Fatal(err)
		}
		p.Precision, p.Runtime, p.Batch, p.FusedLoss = prec, mustRuntime(t, "cpu"), tc.batch, core.TRLHead
		if got := evalPlan(t, p).SavedActivations; got != tc.saved {
			t.Errorf("%s, batch %d: memsh keeps %d bytes under TRL's fused head, TRL %d (%+d)", tc.dtype, tc.batch, got, tc.saved, got-tc.saved)
		}
		p.FusedLoss = ""
		if got := evalPlan(t, p).SavedActivations; got != tc.plain {
			t.Errorf("%s, batch %d: memsh keeps %d bytes under the model's loss, transformers %d (%+d)", tc.dtype, tc.batch, got, tc.plain, got-tc.plain)
		}
	}
}
