package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestSlidingWindowMaskSDPA: Mistral's sliding window under SDPA, as
// transformers 5.17.0 runs it (torch 2.15.0, CPU, bf16). torch's SDPA has
// no window: once the sequence reaches sliding_window (masking_utils
// _ignore_causal_mask_sdpa: kv_length >= the window) transformers hands it
// the sliding mask, which it keeps as an additive bias in every layer, and
// k and v reach it expanded to every head (no enable_gqa with a mask);
// under the window it passes no mask, as without one. mistral-tiny.json
// (2 layers, 4 heads of 16 for 2 kv heads, no window) with
// sliding_window 16 and 512; the bytes autograd saves, per
// tools/oracle/hf_block_saved.py CONFIG 2 1 SEQ bfloat16 sdpa:
//
//	seq 64: no window 418,060; window 512 418,060; window 16 450,828 (+32,768)
//	seq 16: no window 104,524; window 16 109,644 (+5,120)
//
// The differences are the test's: 2 layers x ([1, 1, seq, seq] bf16 bias
// + k and v of 2 more heads). (memsh's totals are 4,104 bytes under the
// harness's at every size: what the harness counts outside the layers.)
func TestSlidingWindowMaskSDPA(t *testing.T) {
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	saved := func(file string, seq int64) int64 {
		m, err := hf.FromConfigOptions(readHF(t, file), hf.Options{Attn: "sdpa", Transformers: "5.17.0"})
		if err != nil {
			t.Fatal(file, err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Seq = cpu, seq
		return evalPlan(t, p).SavedActivations
	}
	for _, tc := range []struct {
		file string
		seq  int64
		more int64 // saved bytes over no window, transformers'
	}{
		{"mistral-tiny-w512.json", 64, 0},
		{"mistral-tiny-w16.json", 64, 32_768},
		{"mistral-tiny-w16.json", 16, 5_120},
	} {
		if got := saved(tc.file, tc.seq) - saved("mistral-tiny.json", tc.seq); got != tc.more {
			t.Errorf("%s at %d tokens keeps %d bytes more than no window, transformers %d", tc.file, tc.seq, got, tc.more)
		}
	}
}
