package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// MPT's parameters on the meta device (transformers 5.25.0): mpt-tiny.json
// 115,008 (64 wide, 4 heads, MLP 4 x 64, vocab 256, tied; the norms a
// weight without bias, no linear biased): 1 layer 65,728 (the oracle's
// param_bytes).
func TestMPTParams(t *testing.T) {
	checkParams(t, map[string]int64{"mpt-tiny.json": 115_008})
}

// What MPT's blocks keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast): 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/mpt-tiny.json {1,2} 2 32 {float32,bfloat16} eager nocache
//
// MptAttention's own eager attention: the fp32 ALiBi bias promotes the
// scores to fp32, masked_fill saves the model's one (2, 1, 32, 32) bool
// mask, the softmax keeps fp32 probabilities and the P.V matmul the model
// dtype's. The model has no SDPA path (with attn_implementation "sdpa"
// from_config raises "MptForCausalLM does not support an attention
// implementation through torch.nn.functional.scaled_dot_product_attention
// yet"; a default load runs eager): memsh's attn="sdpa" runs eager.
func TestMPTSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"mpt-tiny.json", "fp32", "eager", 397_828, 693_764},
		{"mpt-tiny.json", "fp32", "sdpa", 397_828, 693_764},
		{"mpt-tiny.json", "bf16", "eager", 265_988, 446_724},
		{"mpt-tiny.json", "bf16", "sdpa", 265_988, 446_724},
	})
}

// With every block checkpointed (use_reentrant=False):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/mpt-tiny.json {1,2} 2 32 {float32,bfloat16} eager nocache ckpt held
//
// kept fp32 116,228 / 132,612, bf16 91,396 / 99,588: each block keeps its
// input. The blocks are handed no rotary tables and no position_ids, but
// each checkpointed block holds until its backward what MptModel hands
// it, out of the pack hook's sight (held, at 1 and 2 blocks alike): the
// (2, 1, 32, 32) bool mask and the (4, 1, 128) fp32 ALiBi bias, 2,048
// bytes each.
func TestMPTCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		one, two  int64 // hf_block_saved.py's kept at 1 and 2 blocks
		held      int64
	}{
		{"fp32", 116_228, 132_612, 2048 + 2048},
		{"bf16", 91_396, 99_588, 2048 + 2048},
	} {
		one, two := graniteSaved(t, "mpt-tiny.json", 1, tc.precision, "eager", true), graniteSaved(t, "mpt-tiny.json", 2, tc.precision, "eager", true)
		if one != tc.one+tc.held || two != tc.two+tc.held {
			t.Errorf("%s: 1 block %d (%+d), 2 blocks %d (%+d)", tc.precision, one, one-tc.one-tc.held, two, two-tc.two-tc.held)
		}
	}
}

// mpt under 4.32 is refused (4.31.0 has no models/mpt); attn="flash" is
// refused (no flash path); attn_config.clip_qkv is refused naming the key;
// the attribute_map's hidden_size, num_attention_heads and
// num_hidden_layers are read for d_model, n_heads and n_layers.
func TestMPTConfig(t *testing.T) {
	tiny := string(readHF(t, "mpt-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.31.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "mpt" needs transformers 4.32 or later`) {
		t.Errorf("transformers 4.31.0: error %v, want one naming 4.32", err)
	}
	if _, err := hf.FromConfig([]byte(tiny), "flash"); err == nil || !strings.Contains(err.Error(), "no flash-attention path") {
		t.Errorf("attn flash: error %v", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"clip_qkv": null`, `"clip_qkv": 6`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"attn_config.clip_qkv" is not modelled`) {
		t.Errorf("clip_qkv 6: error %v", err)
	}
	m, err := hf.FromConfig([]byte(strings.Replace(strings.Replace(tiny, `"d_model": 64`, `"hidden_size": 64`, 1), `"n_heads": 4`, `"num_attention_heads": 4`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 115_008 {
		t.Errorf("hidden_size, num_attention_heads: %d parameters, want 115,008", got)
	}
}
