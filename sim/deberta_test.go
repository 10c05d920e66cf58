package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// DeBERTa-v3's parameter counts, from the hub's config.json fields
// (tools/oracle/deberta/README.md names where each was read), each checked
// on the meta device under transformers 5.25.0 and torch 2.15.0:
//
//	/work/venv-t/bin/python tools/oracle/deberta_params.py sim/testdata/hf/{deberta-v3-{xsmall,small,base,large},mdeberta-v3-base}.json
//
// The masked LM's decoder is tied to word_embeddings (its bias counted
// once); sequence and token classification have 2 labels.
func TestDebertaParams(t *testing.T) {
	checkArchParams(t, []archParams{
		{"deberta-v3-base.json", "DebertaV2ForMaskedLM", 184_551_780},
		{"deberta-v3-base.json", "DebertaV2Model", 183_831_552},
		{"deberta-v3-base.json", "DebertaV2ForSequenceClassification", 184_423_682},
		{"deberta-v3-base.json", "DebertaV2ForTokenClassification", 183_833_090},
		{"deberta-v3-large.json", "DebertaV2ForMaskedLM", 435_191_908},
		{"deberta-v3-large.json", "DebertaV2ForSequenceClassification", 435_063_810},
		{"deberta-v3-small.json", "DebertaV2ForSequenceClassification", 141_896_450},
		{"deberta-v3-xsmall.json", "DebertaV2ForSequenceClassification", 70_830_722},
		{"mdeberta-v3-base.json", "DebertaV2ForMaskedLM", 279_061_880},
		{"mdeberta-v3-base.json", "DebertaV2ForSequenceClassification", 278_810_882},
		{"deberta-v3-tiny.json", "DebertaV2ForMaskedLM", 112_576},
	})
}

// What DeBERTa-v3 keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (/work/venv-t, the CPU, no autocast, eager: the model
// has no other path): deberta-v3-tiny.json (64 wide, 4 heads,
// intermediate 128, vocab 128, position_buckets 256, no dropout),
// DebertaV2ForMaskedLM; -cls and -tok the same with the 2-label heads; 2
// samples of 32 tokens, 1 layer and 2, the batch carrying a mask of ones:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deberta-v3-tiny{,-cls,-tok}.json {1,2} 2 32 {float32,bfloat16} eager mask
//
// The layer's storages one by one: tools/oracle/deberta/README.md.
func TestDebertaSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"deberta-v3-tiny.json", "fp32", "eager", 2_090_256, 3_928_348},
		{"deberta-v3-tiny.json", "bf16", "eager", 1_054_856, 1_983_118},
		{"deberta-v3-tiny-cls.json", "fp32", "eager", 2_008_400, 3_846_492},
		{"deberta-v3-tiny-cls.json", "bf16", "eager", 1_013_698, 1_941_960},
		{"deberta-v3-tiny-tok.json", "fp32", "eager", 2_008_336, 3_846_428},
		{"deberta-v3-tiny-tok.json", "bf16", "eager", 1_013_896, 1_942_158},
	})
}

// What memsh does not model is refused naming the key: DeBERTa-v2's
// xlarge and xxlarge layouts (ConvLayer, attention_head_size), separate
// position projections, absolute positions, token types, an embedding
// projection, other relative score types.
func TestDebertaRefusals(t *testing.T) {
	base := string(readHF(t, "deberta-v3-tiny.json"))
	for _, tc := range []struct{ from, to, key string }{
		{`"share_att_key": true`, `"share_att_key": false`, "share_att_key"},
		{`"position_biased_input": false`, `"position_biased_input": true`, "position_biased_input"},
		{`"type_vocab_size": 0`, `"type_vocab_size": 2`, "type_vocab_size"},
		{`"pos_att_type": ["p2c", "c2p"]`, `"pos_att_type": ["c2p"]`, "pos_att_type"},
		{`"pos_att_type": ["p2c", "c2p"]`, `"pos_att_type": "p2c|c2p", "conv_kernel_size": 3`, "conv_kernel_size"},
		{`"norm_rel_ebd": "layer_norm"`, `"norm_rel_ebd": "none"`, "norm_rel_ebd"},
		{`"relative_attention": true`, `"relative_attention": false`, "relative_attention"},
		{`"hidden_size": 64,`, `"hidden_size": 64, "embedding_size": 32,`, "embedding_size"},
		{`"hidden_size": 64,`, `"hidden_size": 64, "attention_head_size": 32,`, "attention_head_size"},
	} {
		cfg := strings.Replace(base, tc.from, tc.to, 1)
		if cfg == base {
			t.Fatalf("%s: %q not in the config", tc.key, tc.from)
		}
		_, err := hf.FromConfig([]byte(cfg), "eager")
		if err == nil || !strings.Contains(err.Error(), `"`+tc.key+`"`) {
			t.Errorf("%s: got %v, want an error naming it", tc.key, err)
		}
	}
	// "p2c|c2p" as the hub's v3 configs write it is accepted.
	cfg := strings.Replace(base, `"pos_att_type": ["p2c", "c2p"]`, `"pos_att_type": "p2c|c2p"`, 1)
	if _, err := hf.FromConfig([]byte(cfg), "eager"); err != nil {
		t.Errorf("pos_att_type \"p2c|c2p\": %v", err)
	}
}

// With the published dropouts (deberta-v3-tiny-dropout.json:
// hidden_dropout_prob and attention_probs_dropout_prob 0.1) a layer keeps
// four masks more: pos_dropout's over the shared relative table (512 x
// 64, and the projections then save that layer's own dropped copy of it),
// the probabilities' (2 x 4 heads x 32 x 32) and the two hidden dropouts'
// (2 x 32 x 64 each); the embeddings' dropout one more (2 x 32 x 64).
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deberta-v3-tiny-dropout.json {1,2} 2 32 float32 eager mask
//
// fp32 2,336,016 / 4,534,556 (checkCPUDropout).
func TestDebertaDropoutMasks(t *testing.T) {
	checkCPUDropout(t, "deberta-v3-tiny-dropout.json", 512*64+2*4*32*32+2*2*32*64, 2*32*64, []cpuDropout{
		{"fp32", 4, 2_336_016, 4_534_556},
	})
}

// With every layer checkpointed (use_reentrant=False), 1 and 2 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/deberta-v3-tiny.json {1,2} 2 32 float32 eager mask ckpt held
//
// saved 153,860 and 170,244 (a layer more keeps its input, 16,384), held
// besides 139,264 at either depth: the layers' arguments the encoder made
// once, relative_pos ((1, 32, 32) int64, 8,192) and the rel_embeddings
// LayerNorm's output ((512, 64), 131,072).
func TestDebertaCheckpointSavesAsTransformers(t *testing.T) {
	for i, want := range []int64{153_860 + 139_264, 170_244 + 139_264} {
		if got := graniteSaved(t, "deberta-v3-tiny.json", i+1, "fp32", "eager", true); got != want {
			t.Errorf("fp32, %d layers: %d saved, want %d (%+d)", i+1, got, want, got-want)
		}
	}
}
