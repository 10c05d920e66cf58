package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// GPTBigCode's parameters on the meta device (transformers 5.25.0):
// gpt_bigcode-tiny.json 112,192 (64 wide, 4 heads of 16, multi_query:
// c_attn 64 x (64 + 2 x 16), MLP 256, 128 positions, vocab 256, tied),
// gpt_bigcode-tiny-mha.json 91,648 (n_head kv heads, MLP 128);
// starcoder.json 15,517,456,384 for StarCoder's published sizes (6144
// wide, 40 layers, 48 heads, MLP 24576, 8192 positions, vocab 49152; as
// Cerebras' modelzoo converter lists them), the card's 15.5B.
func TestGPTBigCodeParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"gpt_bigcode-tiny.json":     112_192,
		"gpt_bigcode-tiny-mha.json": 91_648,
		"starcoder.json":            15_517_456_384,
	})
}

// What GPTBigCode's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast): 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/gpt_bigcode-tiny{,-mha}.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// GPT-2's layer with one fused c_attn whose q, k and v stay views of its
// output: multi_query's one k and v head goes to SDPA as it is
// (enable_gqa) and is repeated for every head by eager attention's
// repeat_kv; the eager softmax is fp32.
func TestGPTBigCodeSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"gpt_bigcode-tiny.json", "fp32", "sdpa", 339_716, 579_332},
		{"gpt_bigcode-tiny.json", "fp32", "eager", 396_036, 691_972},
		{"gpt_bigcode-tiny.json", "bf16", "sdpa", 203_780, 324_100},
		{"gpt_bigcode-tiny.json", "bf16", "eager", 264_196, 444_932},
		{"gpt_bigcode-tiny-mha.json", "fp32", "sdpa", 298_756, 497_412},
		{"gpt_bigcode-tiny-mha.json", "fp32", "eager", 330_500, 560_900},
		{"gpt_bigcode-tiny-mha.json", "bf16", "sdpa", 183_300, 283_140},
		{"gpt_bigcode-tiny-mha.json", "bf16", "eager", 231_428, 379_396},
	})
}

// With attn_pdrop, resid_pdrop and embd_pdrop 0.1
// (gpt_bigcode-tiny-dropout.json), fp32,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/gpt_bigcode-tiny-dropout.json {1,2} 2 32 float32 {sdpa,eager} nocache
//
// eager 510,724 /
// 904,964 on the CPU, whose dropout keeps a noise tensor in the input's
// dtype where CUDA's keeps a bool mask (checkCPUDropout): a layer's masks
// are the probabilities' (2 x 4 heads x 32 x 32) and both c_proj
// outputs' (2 x 32 x 64), the embeddings' once. (SDPA with a dropout
// runs PyTorch's math fallback on the CPU and keeps what eager keeps,
// 510,724 / 904,964 too; memsh prices SDPA's fused CUDA kernels.)
func TestGPTBigCodeDropoutMasks(t *testing.T) {
	checkCPUDropout(t, "gpt_bigcode-tiny-dropout.json", 8192+2*4096, 4096, []cpuDropout{
		{"fp32", 4, 510_724, 904_964},
	})
}

// With every layer checkpointed (use_reentrant=False):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/gpt_bigcode-tiny.json {1,2} 2 32 {float32,bfloat16} sdpa nocache ckpt
//
// each layer keeps its input alone; GPTBigCodeModel hands its layers no
// position_ids (its wpe lookup keeps the index), so a checkpointed layer
// holds nothing else.
func TestGPTBigCodeCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		one, two  int64
	}{
		{"fp32", 116_484, 132_868},
		{"bf16", 91_652, 99_844},
	} {
		one, two := graniteSaved(t, "gpt_bigcode-tiny.json", 1, tc.precision, "sdpa", true), graniteSaved(t, "gpt_bigcode-tiny.json", 2, tc.precision, "sdpa", true)
		if one != tc.one || two != tc.two {
			t.Errorf("%s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.precision, one, one-tc.one, two, two-tc.two)
		}
	}
}

// gpt_bigcode under 4.54 is refused (4.53 and earlier run their own
// attention); add_cross_attention is refused naming the key; n_head must
// divide n_embd.
func TestGPTBigCodeConfig(t *testing.T) {
	tiny := string(readHF(t, "gpt_bigcode-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.53.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "gpt_bigcode" needs transformers 4.54 or later`) {
		t.Errorf("transformers 4.53.0: error %v, want one naming 4.54", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"multi_query": true`, `"multi_query": true, "add_cross_attention": true`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"add_cross_attention" is not modelled`) {
		t.Errorf("add_cross_attention: error %v", err)
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"n_head": 4`, `"n_head": 6`, 1)), "sdpa")
	if err == nil || !strings.Contains(err.Error(), `"n_head" must divide n_embd`) {
		t.Errorf("n_head 6: error %v", err)
	}
}
