package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// GPT-J's parameters on the meta device (transformers 5.25.0):
// gptj-tiny.json 132,352 (64 wide, 2 layers, 4 heads of 16, rotary_dim 8,
// MLP 256, vocab 256, lm_head untied with its bias; 82,752 at 1 layer);
// gpt-j-6b.json 6,050,882,784 for GPT-J-6B's sizes (4096 wide, 28 layers,
// 16 heads, rotary_dim 64, vocab 50400, untied: GPTJConfig's defaults at
// 5.25.0, whose docstring names EleutherAI/gpt-j-6B, as a public copy of
// that checkpoint's config.json lists them).
func TestGPTJParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"gptj-tiny.json": 132_352,
		"gpt-j-6b.json":  6_050_882_784,
	})
}

// What GPT-J's layers keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast): 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/gptj-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// ln_1's output feeds q, k, v and fc_in; apply_rotary_pos_emb, called
// for k and for q, saves a repeat_interleaved sin and cos of its own
// ([1, 32, 1, 8] each: four a layer); eager attention multiplies fp32
// copies of q and k (bf16: two fp32 [2, 4, 32, 16] copies in place of q
// and k) and keeps the fp32 softmax and the probabilities cast to v's
// dtype; gelu_new's Python arithmetic keeps four [64, 256] tensors
// besides fc_out's input.
func TestGPTJSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"gptj-tiny.json", "fp32", "sdpa", 531_460, 963_076},
		{"gptj-tiny.json", "fp32", "eager", 563_204, 1_026_564},
		{"gptj-tiny.json", "bf16", "sdpa", 299_524, 515_844},
		{"gptj-tiny.json", "bf16", "eager", 364_036, 644_868},
	})
}

// With attn_pdrop, resid_pdrop and embd_pdrop 0.1
// (gptj-tiny-dropout.json),
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/gptj-tiny-dropout.json {1,2} 2 32 {float32,bfloat16} eager nocache
//
// fp32 677,892 / 1,239,556, bf16 404,996 / 718,596 on the CPU, whose
// dropout keeps a noise tensor in the input's dtype where CUDA's keeps a
// bool mask (checkCPUDropout): a layer's masks are the probabilities'
// (2 x 4 heads x 32 x 32, cast to v's dtype before the dropout),
// attn.resid_dropout's and mlp.dropout's (2 x 32 x 64 each), the
// embeddings' once.
func TestGPTJDropoutMasks(t *testing.T) {
	checkCPUDropout(t, "gptj-tiny-dropout.json", 8192+2*4096, 4096, []cpuDropout{
		{"fp32", 4, 677_892, 1_239_556},
		{"bf16", 2, 404_996, 718_596},
	})
}

// With every layer checkpointed (use_reentrant=False):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/gptj-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache ckpt held
//
// kept fp32 116,228 / 132,612, bf16 91,396 / 99,588 under both (each
// layer keeps its input); each checkpointed layer holds until its
// backward what GPTJModel hands it (held, at 1 and 2 layers alike): the
// (1, 32) position_ids (256 bytes) and the one (1, 32, 8) table sin and
// cos are split off (fp32 1,024, bf16 512), and under eager the
// (2, 1, 32, 32) mask (fp32 8,192, bf16 4,096). The per-call sin and
// cos are made inside the layer and recomputed.
func TestGPTJCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		one, two        int64 // hf_block_saved.py's kept at 1 and 2 layers
		held            int64
	}{
		{"fp32", "sdpa", 116_228, 132_612, 1280},
		{"fp32", "eager", 116_228, 132_612, 9472},
		{"bf16", "sdpa", 91_396, 99_588, 768},
		{"bf16", "eager", 91_396, 99_588, 4864},
	} {
		one, two := graniteSaved(t, "gptj-tiny.json", 1, tc.precision, tc.attn, true), graniteSaved(t, "gptj-tiny.json", 2, tc.precision, tc.attn, true)
		if one != tc.one+tc.held || two != tc.two+tc.held {
			t.Errorf("%s %s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.precision, tc.attn, one, one-tc.one-tc.held, two, two-tc.two-tc.held)
		}
	}
}

// gptj under 5.24 is refused (5.23 and earlier run their own attention);
// rotary_dim null or wider than a head is refused naming the key; n_head
// must divide n_embd.
func TestGPTJConfig(t *testing.T) {
	tiny := string(readHF(t, "gptj-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.23.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "gptj" needs transformers 5.24 or later`) {
		t.Errorf("transformers 5.23.0: error %v, want one naming 5.24", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"rotary_dim": 8`, `"rotary_dim": null`, `"rotary_dim" null`},
		{`"rotary_dim": 8`, `"rotary_dim": 32`, `"rotary_dim" must be even and at most the head (16`},
		{`"rotary_dim": 8`, `"rotary_dim": 7`, `"rotary_dim" must be even`},
		{`"n_head": 4`, `"n_head": 6`, `"n_head" must divide n_embd`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.to, err, tc.want)
		}
	}
}
