package sim

import "testing"

// TestPhi3EmbdPdropUnused: Phi-3's embd_pdrop drops nothing. Phi3Config
// reads it, but 4.41.0's Phi3Model builds embed_dropout and never calls
// it and 4.57.1's and 5.25.0's have no such module, so an embd_pdrop of
// 0.1 saves what 0 does, where resid_pdrop's masks do show (the harness
// runs in training mode). Measured with
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/CONFIG 2 2 32 DTYPE sdpa nocache
//
// (transformers 5.25.0, torch 2.15.0, CPU): phi3-tiny.json and
// phi3-tiny-embd-pdrop.json alike, float32 762,116 B, bfloat16 456,964 B.
func TestPhi3EmbdPdropUnused(t *testing.T) {
	for _, tc := range []struct {
		precision string
		want      int64
	}{
		{"fp32", 762116},
		{"bf16", 456964},
	} {
		for _, file := range []string{"phi3-tiny.json", "phi3-tiny-embd-pdrop.json"} {
			if got := graniteSaved(t, file, 2, tc.precision, "sdpa", false); got != tc.want {
				t.Errorf("%s %s: memsh saves %d bytes, transformers %d (%+d)", file, tc.precision, got, tc.want, got-tc.want)
			}
		}
	}
}
