package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Falcon's attention moved onto transformers' shared attention interface
// in 5.25.0 (falconSharedSince): eager_attention_forward's repeat_kv
// copies and fp32 softmax, and a causal mask FalconModel always
// materializes. What one bf16 layer keeps for backward (two layers minus
// one, 2 samples of 16 tokens), measured on the CPU with torch 2.15.0:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/falcon-tiny.json {1,2} 2 16 bfloat16 eager
//
// under 5.24.0 (PYTHONPATH: the 5.24.0 wheel unpacked) and 5.25.0:
// falcon-tiny (Falcon-7B's layout: multi-query, one kv head, parallel
// attention and MLP, rotary) keeps 61,584 and 69,760 bytes,
// falcon-tiny-newarch (Falcon-40B's and 180B's: new_decoder_architecture,
// 2 kv heads of 4, two layer norms) 65,808 and 73,984. memsh keeps
// 61,568 and 65,792 under 5.24 (16 bytes fewer, as before) and 69,760 and
// 73,984 under 5.25. For falcon-tiny,
// 8,192 more, the softmax's fp32 output ([2, 4, 16, 16]) where 5.24 kept
// its bf16 one, which the P.V matmul kept too (now the bf16 copy it
// reads); k and v reach the matmuls as repeat_kv's copies, as many bytes
// as bmm's copies of the one broadcast kv head before. Under SDPA on the
// CPU the block keeps 52,880 and 52,864 bytes (CPU kernels; memsh models
// CUDA's, where 5.25's mask also takes SDPA off enable_gqa).
func TestFalconSharedPath(t *testing.T) {
	for _, tc := range []struct {
		file, version, attn string
		want                int64
	}{
		{"falcon-tiny.json", "5.25.0", "eager", 69_760},
		{"falcon-tiny.json", "", "eager", 69_760},
		{"falcon-tiny-newarch.json", "5.25.0", "eager", 73_984},
	} {
		if got := hfBlockSaved(t, tc.file, "bf16", 2, hf.Options{Attn: tc.attn, Transformers: tc.version}); got != tc.want {
			t.Errorf("%s, transformers %q, %s: a layer keeps %d bytes, transformers %d", tc.file, tc.version, tc.attn, got, tc.want)
		}
	}
	// 5.24.0 kept 4.x's path: within 16 bytes of what it measures.
	for file, want := range map[string]int64{"falcon-tiny.json": 61_584, "falcon-tiny-newarch.json": 65_808} {
		if got := hfBlockSaved(t, file, "bf16", 2, hf.Options{Attn: "eager", Transformers: "5.24.0"}); got < want-16 || got > want {
			t.Errorf("%s under 5.24.0: a layer keeps %d bytes, transformers %d", file, got, want)
		}
	}
	// ALiBi rides on the attention mask, which flash attention does not
	// take: FalconFlashAttention2 (4.x to 5.24) and FalconModel (5.25) raise.
	for _, v := range []string{"4.57.1", "5.25.0"} {
		cfg := `{"model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100, "alibi": true}`
		_, err := hf.FromConfigOptions([]byte(cfg), hf.Options{Attn: "flash", Transformers: v})
		if err == nil || !strings.Contains(err.Error(), "no flash-attention path with ALiBi") {
			t.Errorf("alibi with flash under %s: %v", v, err)
		}
	}
}
