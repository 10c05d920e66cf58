package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// VaultGemma's parameters on the meta device (transformers 5.25.0):
// vaultgemma-tiny.json 90,432 (64 wide, 2 layers, 4 heads and 2 kv heads
// of 16, MLP 128, vocab 256, tied; 53,440 at 1 layer): gemma2-tiny.json's
// sizes without Gemma 2's two post-norms a layer; vaultgemma-1b.json
// 1,038,741,120 for VaultGemma 1B's sizes (1152 wide, 26 layers, 4 heads
// and 4 kv heads of 256, MLP 6912, vocab 256000, tied; as keras-hub's
// Gemma converter test lists them), the card's 1B.
func TestVaultGemmaParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"vaultgemma-tiny.json": 90_432,
		"vaultgemma-1b.json":   1_038_741_120,
	})
}

// What VaultGemma's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast): 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/vaultgemma-tiny{,-w16}.json {1,2} 2 32 {float32,bfloat16} eager nocache
//
// fp32 547,336 / 908,808, bf16 389,638 / 636,422, the same with a window
// of 16 (the eager mask is saved by nothing). Gemma 2's layer (soft-capped
// scores, fp32 softmax, Gemma's RMSNorms, scaled embeddings, capped
// logits) without post_attention_layernorm and post_feedforward_layernorm.
// 5.25.0 has no SDPA path (VaultGemmaPreTrainedModel._supports_sdpa
// False): attn="sdpa" runs eager, as a default load does. The harness
// counts the 0-dim embed_scale buffer embed_tokens' product saves (4
// bytes fp32, 2 bf16), which memsh counts with the buffers, not the saved
// activations (as TestGemmaNormSavesAsTransformers).
func TestVaultGemmaSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, precision, attn string
		one, two, scale       int64
	}{
		{"vaultgemma-tiny.json", "fp32", "eager", 547_336, 908_808, 4},
		{"vaultgemma-tiny.json", "bf16", "eager", 389_638, 636_422, 2},
		{"vaultgemma-tiny.json", "fp32", "sdpa", 547_336, 908_808, 4},
		{"vaultgemma-tiny-w16.json", "fp32", "eager", 547_336, 908_808, 4},
		{"vaultgemma-tiny-w16.json", "bf16", "eager", 389_638, 636_422, 2},
	} {
		one := graniteSaved(t, tc.file, 1, tc.precision, tc.attn, false) + tc.scale
		two := graniteSaved(t, tc.file, 2, tc.precision, tc.attn, false) + tc.scale
		if one != tc.one || two != tc.two {
			t.Errorf("%s %s %s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.file, tc.precision, tc.attn, one, one-tc.one, two, two-tc.two)
		}
	}
}

// With every layer checkpointed (use_reentrant=False):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/vaultgemma-tiny{,-w16}.json {1,2} 2 32 {float32,bfloat16} eager nocache ckpt held
//
// kept fp32 198,152 / 214,536, bf16 148,998 / 157,190 (embed_scale's 4
// or 2 bytes among them), the window alike; each checkpointed layer holds
// until its backward the (1, 32) position_ids, the rotary cos and sin and
// its layer type's (2, 1, 32, 32) mask: the sliding layer's at 1 layer
// (fp32 12,544, bf16 6,400), the full layer's besides at 2 (fp32 20,736,
// bf16 10,496), a window of 512 tokens or of 16.
func TestVaultGemmaCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, precision  string
		one, two         int64 // kept at 1 and 2 layers
		heldOne, heldTwo int64
		scale            int64
	}{
		{"vaultgemma-tiny.json", "fp32", 198_152, 214_536, 12_544, 20_736, 4},
		{"vaultgemma-tiny.json", "bf16", 148_998, 157_190, 6_400, 10_496, 2},
		{"vaultgemma-tiny-w16.json", "fp32", 198_152, 214_536, 12_544, 20_736, 4},
		{"vaultgemma-tiny-w16.json", "bf16", 148_998, 157_190, 6_400, 10_496, 2},
	} {
		one := graniteSaved(t, tc.file, 1, tc.precision, "eager", true) + tc.scale
		two := graniteSaved(t, tc.file, 2, tc.precision, "eager", true) + tc.scale
		if one != tc.one+tc.heldOne || two != tc.two+tc.heldTwo {
			t.Errorf("%s %s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.file, tc.precision, one, one-tc.one-tc.heldOne, two, two-tc.two-tc.heldTwo)
		}
	}
}

// vaultgemma under 4.57 is refused (4.56.2 has no models/vaultgemma).
func TestVaultGemmaConfig(t *testing.T) {
	tiny := readHF(t, "vaultgemma-tiny.json")
	_, err := hf.FromConfigOptions(tiny, hf.Options{Attn: "sdpa", Transformers: "4.56.2"})
	if err == nil || !strings.Contains(err.Error(), `model_type "vaultgemma" needs transformers 4.57 or later`) {
		t.Errorf("transformers 4.56.2: error %v, want one naming 4.57", err)
	}
}
