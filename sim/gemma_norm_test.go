package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// TestGemmaNormSavesAsTransformers: Gemma 2 and Gemma 3 whole, as
// transformers runs them on the CPU (bf16, torch 2.15.0): what autograd
// saves in two layers (layer 0 local, layer 1 global) of
// gemma2-tiny.json and gemma3-tiny.json, per
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/CONFIG 2 1 SEQ bfloat16 ATTN nocache
//
// under 5.25.0 (Gemma 2's SDPA under 5.20.0, its last release with one).
// Their RMSNorms (and Gemma 3's q_norm and k_norm) run in fp32 and scale
// by 1 + weight before the cast back, keeping the fp32 rows and the fp32
// 1 + weight (nn.GemmaNorm): lowered as Llama's, memsh kept 128 bytes a
// token less per norm (a bf16 row for an fp32 one) and 256 per norm
// (Gemma 2 at 64 tokens: 822,532 for 902,670 eager). memsh counts all
// but what the harness sees outside the layers: the rotary cos and sin
// (2 x seq x 16 x 2 bytes; Gemma 3 has a second pair for its local
// layers), 8 bytes of the labels and the 0-dim embed_scale (2 bytes).
func TestGemmaNormSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, attn, version string
		seq, measured       int64
		ropeTables          int64
	}{
		{"gemma2-tiny.json", "eager", "5.25.0", 8, 86_190, 1},
		{"gemma2-tiny.json", "eager", "5.25.0", 16, 178_254, 1},
		{"gemma2-tiny.json", "eager", "5.25.0", 64, 902_670, 1},
		{"gemma2-tiny.json", "sdpa", "5.20.0", 64, 626_190, 1},
		{"gemma3-tiny.json", "eager", "5.25.0", 8, 94_510, 2},
		{"gemma3-tiny.json", "eager", "5.25.0", 64, 910_094, 2},
		{"gemma3-tiny.json", "sdpa", "5.25.0", 64, 699_150, 2},
		{"gemma3-tiny.json", "sdpa", "5.25.0", 16, 176_718, 2},
	} {
		want := tc.measured - tc.ropeTables*2*tc.seq*16*2 - 8 - 2
		if got := cpuSaved(t, tc.file, hf.Options{Attn: tc.attn, Transformers: tc.version}, 1, tc.seq); got != want {
			t.Errorf("%s, %s, %d tokens: memsh keeps %d bytes, transformers %d (%+d)", tc.file, tc.attn, tc.seq, got, want, got-want)
		}
	}
}
