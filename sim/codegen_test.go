package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// CodeGen's parameters on the meta device (transformers 5.25.0):
// codegen-tiny.json and codegen-tiny-4heads.json 132,352 each (64 wide,
// 2 layers, 8 or 4 heads, rotary_dim 4, MLP 256, vocab 256, lm_head
// untied with its bias: GPT-J's tiny count, qkv_proj holding q_proj's,
// k_proj's and v_proj's weights); codegen-350m-mono.json, the hub's
// config.json of Salesforce/codegen-350M-mono (huggingface.co, blame at
// a268ccf6: 20 layers of 1024, 16 heads, rotary_dim 32, vocab 51200,
// untied), 356,712,448 (its card's "350M").
func TestCodeGenParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"codegen-tiny.json":        132_352,
		"codegen-tiny-4heads.json": 132_352,
		"codegen-350m-mono.json":   356_712_448,
	})
}

// What CodeGen's layers keep for backward, against transformers 5.25.0
// on PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/codegen-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/codegen-tiny-4heads.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// With 8 heads q, k and v are copies reshape makes of qkv_proj's shards
// (SDPA keeps v's, 8,192 B in fp32, where GPT-J's v is a view of
// v_proj's output of the same size); with 4 heads, one a shard, they are
// views and SDPA keeps the whole qkv_proj output (3 x 8,192 B: fp32
// 562,180 / 1,024,516 against 530,436 / 961,028). In bf16 the rotary
// tables stay fp32 (from_pretrained leaves the embed_positions buffer
// fp32; cls(cfg).to(bfloat16) would cast it): the four per-call tables
// [1, 32, 1, 4] are fp32, and q and k leave the rotary in fp32 and are
// cast back to v's dtype, the copies SDPA keeps.
func TestCodeGenSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"codegen-tiny.json", "fp32", "sdpa", 530_436, 961_028},
		{"codegen-tiny.json", "fp32", "eager", 593_924, 1_088_004},
		{"codegen-tiny.json", "bf16", "sdpa", 300_548, 517_892},
		{"codegen-tiny.json", "bf16", "eager", 413_188, 743_172},
		{"codegen-tiny-4heads.json", "fp32", "sdpa", 562_180, 1_024_516},
		{"codegen-tiny-4heads.json", "fp32", "eager", 561_156, 1_022_468},
		{"codegen-tiny-4heads.json", "bf16", "sdpa", 315_908, 548_612},
		{"codegen-tiny-4heads.json", "bf16", "eager", 364_036, 644_868},
	})
}

// With every layer checkpointed (use_reentrant=False):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/codegen-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32 ckpt held
//
// kept fp32 116,228 / 132,612, bf16 91,396 / 99,588 under both (each
// layer keeps its input); each checkpointed layer holds until its
// backward what CodeGenModel hands it (held, at 1 and 2 layers alike):
// the (1, 32) position_ids (256 bytes), the one (1, 32, 4) table sin and
// cos are split off, fp32 in bf16 too (512), and under eager the
// (2, 1, 32, 32) mask (fp32 8,192, bf16 4,096).
func TestCodeGenCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		one, two        int64 // hf_block_saved.py's kept at 1 and 2 layers
		held            int64
	}{
		{"fp32", "sdpa", 116_228, 132_612, 768},
		{"fp32", "eager", 116_228, 132_612, 8960},
		{"bf16", "sdpa", 91_396, 99_588, 768},
		{"bf16", "eager", 91_396, 99_588, 4864},
	} {
		one, two := graniteSaved(t, "codegen-tiny.json", 1, tc.precision, tc.attn, true), graniteSaved(t, "codegen-tiny.json", 2, tc.precision, tc.attn, true)
		if one != tc.one+tc.held || two != tc.two+tc.held {
			t.Errorf("%s %s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.precision, tc.attn, one, one-tc.one-tc.held, two, two-tc.two-tc.held)
		}
	}
}

// codegen under 5.24 is refused (5.23 and earlier run their own
// attention); rotary_dim null or wider than a head is refused naming the
// key, n_head must divide n_embd and n_embd be a multiple of the 4
// shards; the module names are transformers'.
func TestCodeGenConfig(t *testing.T) {
	tiny := string(readHF(t, "codegen-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.23.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "codegen" needs transformers 5.24 or later`) {
		t.Errorf("transformers 5.23.0: error %v, want one naming 5.24", err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"rotary_dim": 4`, `"rotary_dim": null`, `"rotary_dim" null`},
		{`"rotary_dim": 4`, `"rotary_dim": 16`, `"rotary_dim" must be even and at most the head (8`},
		{`"n_head": 8`, `"n_head": 6`, `"n_head" must divide n_embd`},
		{"\"n_embd\": 64,\n  \"n_head\": 8", "\"n_embd\": 66,\n  \"n_head\": 6", `"n_embd" must be a multiple of 4 for model_type codegen`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.to, err, tc.want)
		}
	}
	checkHasParams(t, tiny, "transformer.wte.weight", "transformer.h.0.ln_1.weight", "transformer.h.0.attn.qkv_proj.weight",
		"transformer.h.0.attn.out_proj.weight", "transformer.h.1.mlp.fc_in.bias", "transformer.h.1.mlp.fc_out.weight", "transformer.ln_f.bias", "lm_head.bias")
}
