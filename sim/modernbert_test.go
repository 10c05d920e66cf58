package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// ModernBERT's parameter counts, from answerdotai/ModernBERT-base's and
// -large's config.json, each checked on the meta device under
// transformers 5.25.0 and torch 2.15.0 (AutoConfig.for_model, then the
// class under torch.device("meta")): ModernBertForMaskedLM 149,655,232
// (the base checkpoint's total, as public model lists quote it for
// revision 8949b909) and 395,881,664; ModernBertModel 149,014,272 (MTEB's
// n_parameters for the embedders built on it) and 394,781,696; with the
// sequence or token classification head (dense without bias, norm,
// classifier of 2 labels) 149,606,402 and 395,833,346. The tiny files are
// the oracle's below.
func TestModernBERTParams(t *testing.T) {
	checkArchParams(t, []archParams{
		{"modernbert-base.json", "", 149_655_232},
		{"modernbert-base.json", "ModernBertModel", 149_014_272},
		{"modernbert-base.json", "ModernBertForSequenceClassification", 149_606_402},
		{"modernbert-base.json", "ModernBertForTokenClassification", 149_606_402},
		{"modernbert-large.json", "", 395_881_664},
		{"modernbert-large.json", "ModernBertModel", 394_781_696},
		{"modernbert-large.json", "ModernBertForSequenceClassification", 395_833_346},
	})
}

// What ModernBERT keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (/work/venv-t, the CPU, no autocast): modernbert-tiny.json
// (64 wide, 4 heads, intermediate 96, vocab 128, local_attention 16,
// global_attn_every_n_layers 2: layer 0 global, layer 1 sliding, 8 tokens
// either side), ModernBertForMaskedLM; -cls the same as a 3-label
// ModernBertForSequenceClassification with classifier_pooling "mean" (the
// published configs'), -clscls a 2-label one pooling the first token;
// -wide with local_attention 128, which 32 tokens do not reach (no mask);
// -v5 the same as the first with layer_types and rope_parameters, as
// transformers 5 saves a config. 2 samples of 32 tokens, 1 layer and 2:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/modernbert-tiny{,-cls,-clscls,-wide,-v5}.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager}
//
// The sliding layer's SDPA keeps the [batch, 1, seq, seq] bias it makes
// from the bool mask (4,096 bytes in bf16: -wide's 2-layer figure is that
// much less); eager keeps its fp32 softmax beside the probabilities cast
// back, and adds the mask the model made once, which nothing saves. The
// masked LM's loss keeps fp32 log-probabilities (ForMaskedLMLoss upcasts).
func TestModernBERTSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"modernbert-tiny.json", "fp32", "sdpa", 385_028, 661_508},
		{"modernbert-tiny.json", "bf16", "sdpa", 209_924, 348_676},
		{"modernbert-tiny.json", "fp32", "eager", 384_004, 651_268},
		{"modernbert-tiny.json", "bf16", "eager", 241_668, 408_068},
		{"modernbert-tiny-cls.json", "fp32", "sdpa", 287_884, 564_364},
		{"modernbert-tiny-cls.json", "bf16", "sdpa", 144_758, 283_510},
		{"modernbert-tiny-cls.json", "fp32", "eager", 286_860, 554_124},
		{"modernbert-tiny-cls.json", "bf16", "eager", 176_502, 342_902},
		{"modernbert-tiny-clscls.json", "fp32", "sdpa", 303_668, 580_148},
		{"modernbert-tiny-clscls.json", "bf16", "sdpa", 152_610, 291_362},
		{"modernbert-tiny-clscls.json", "fp32", "eager", 302_644, 569_908},
		{"modernbert-tiny-clscls.json", "bf16", "eager", 184_354, 350_754},
		{"modernbert-tiny-wide.json", "bf16", "sdpa", 209_924, 344_580},
		{"modernbert-tiny-wide.json", "bf16", "eager", 241_668, 408_068},
		{"modernbert-tiny-v5.json", "bf16", "sdpa", 209_924, 348_676},
	})
}

// With every layer checkpointed (use_reentrant=False), 1 and 2 layers,
// the batch carrying an attention_mask of ones as a collator passes it
// (memsh's default):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/modernbert-tiny.json {1,2} 2 32 {float32,bfloat16} sdpa ckpt held mask
//
// saved fp32 150,020 and 166,404, bf16 91,908 and 100,100; held besides
// (the layers' arguments, alive until their backward): each layer type's
// rotary cos and sin, (1, 32, 16) each, and at 2 layers the sliding
// layer's bool mask, (2, 1, 32, 32): 4,096 and 10,240 bytes in fp32,
// 2,048 and 6,144 in bf16. (Without the mask the bool mask is one
// [1, 1, 32, 32] storage expanded over the batch, 1,024 bytes less.)
func TestModernBERTCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		saved     [2]int64 // saved + held at 1 and 2 layers
	}{
		{"fp32", [2]int64{150_020 + 4_096, 166_404 + 10_240}},
		{"bf16", [2]int64{91_908 + 2_048, 100_100 + 6_144}},
	} {
		for i, want := range tc.saved {
			if got := graniteSaved(t, "modernbert-tiny.json", i+1, tc.precision, "sdpa", true); got != want {
				t.Errorf("%s, %d layers: %d saved, want %d (%+d)", tc.precision, i+1, got, want, got-want)
			}
		}
	}
}

// attn="flash" (flash_attention_2) computes the sliding window itself:
// the sliding layer keeps what SDPA keeps without its [batch, 1, seq,
// seq] bias (2 x 32 x 32 bf16 at 2 samples of 32 tokens), and where the
// sequence is shorter than the window the two are the same.
func TestModernBERTFlash(t *testing.T) {
	const bias = 2 * 32 * 32 * 2
	for _, tc := range []struct {
		file string
		diff int64
	}{
		{"modernbert-tiny.json", bias},
		{"modernbert-tiny-wide.json", 0},
	} {
		s, f := graniteSaved(t, tc.file, 2, "bf16", "sdpa", false), graniteSaved(t, tc.file, 2, "bf16", "flash", false)
		if s-f != tc.diff {
			t.Errorf("%s: sdpa keeps %d, flash %d: %d apart, want %d", tc.file, s, f, s-f, tc.diff)
		}
	}
}

// What memsh does not model is refused naming the key, and the
// ModernBERT of transformers 4.48 to 5.0 (masks for every layer,
// unpadding under flash) is refused with the release to pass.
func TestModernBERTRefuses(t *testing.T) {
	tiny := string(readHF(t, "modernbert-tiny.json"))
	for _, tc := range []struct {
		config, version, err string
	}{
		{strings.Replace(tiny, `"mlp_dropout": 0.0`, `"mlp_dropout": 0.1`, 1), "", `"mlp_dropout" must be 0`},
		{strings.Replace(tiny, `"classifier_pooling": "mean"`, `"classifier_pooling": "max"`, 1), "", `"classifier_pooling" must be "cls" or "mean"`},
		{strings.Replace(tiny, `"model_type"`, `"sparse_prediction": true, "model_type"`, 1), "", `"sparse_prediction" must be false`},
		{tiny, "4.57.1", `model_type "modernbert" needs transformers 5.1 or later`},
		{tiny, "5.0.0", `needs transformers 5.1 or later (got transformers="5.0.0")`},
	} {
		_, err := hf.FromConfigOptions([]byte(tc.config), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("got %v, want an error containing %q", err, tc.err)
		}
		var ue *units.Error
		if tc.version != "" && (!errors.As(err, &ue) || !strings.Contains(ue.Hint, "4.48 to 5.0 mask every layer and unpad the batch")) {
			t.Errorf("transformers %s: the hint should say why (got %v)", tc.version, err)
		}
	}
}
