package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// Apertus 1.5's text model's parameters, which transformers 5.25.0 counts
// on the meta device (the first line of `/work/venv-t/bin/python
// tools/oracle/hf_defaults.py --only FILE`): apertus1p5-text-tiny.json
// 103,300 (apertus-tiny.json's layers, vocab 256, the head pruned to
// output_vocab_size 200: 106,884 less 56 x 64); apertus1p5-text-defaults.json
// 8,091,086,912, Apertus1p5TextConfig() written out (its defaults: 4096
// wide, 32 layers of 32 heads, MLP 14336, vocab 266,752, the head
// unpruned and untied; swiss-ai/Apertus-v1.5-8B's config.json and card
// were not reachable from here).
func TestApertus1p5TextParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"apertus1p5-text-tiny.json":     103_300,
		"apertus1p5-text-defaults.json": 8_091_086_912,
	})
}

// What Apertus 1.5's text model keeps for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast; xIELU's Python path):
// apertus1p5-text-tiny.json, 2 samples of 32 tokens,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/apertus1p5-text-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Apertus's figures (TestApertusSavesAsTransformers) less the loss's
// 56 pruned columns: fp32 sdpa 577,812 - 64 x 56 x 4 = 563,476.
func TestApertus1p5TextSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"apertus1p5-text-tiny.json", "fp32", "sdpa", 563_476, 1_021_220},
		{"apertus1p5-text-tiny.json", "fp32", "eager", 611_604, 1_117_476},
		{"apertus1p5-text-tiny.json", "bf16", "sdpa", 352_524, 617_748},
		{"apertus1p5-text-tiny.json", "bf16", "eager", 408_844, 730_388},
	})
}

// apertus1p5_text under 5.24 is refused (models/apertus1p5 came with
// 5.24.0); output_vocab_size is refused outside [1, vocab_size] as
// Apertus1p5TextConfig refuses it, and with a tied head (transformers
// ties a vocab_size-wide weight under an lm_head whose out_features the
// loss reads); equal to vocab_size or null it is the full head; the
// multimodal apertus1p5 is refused naming the text model.
func TestApertus1p5TextConfig(t *testing.T) {
	tiny := string(readHF(t, "apertus1p5-text-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.23.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "apertus1p5_text" needs transformers 5.24 or later`) {
		t.Errorf("transformers 5.23.0: error %v, want one naming 5.24", err)
	}
	for _, c := range []struct{ edit, err string }{
		{`"output_vocab_size": 0`, `"output_vocab_size" (0) must be in [1, vocab_size] (vocab_size is 256)`},
		{`"output_vocab_size": 300`, `"output_vocab_size" (300) must be in [1, vocab_size]`},
		{`"output_vocab_size": 2.5`, `"output_vocab_size" must be an integer`},
	} {
		_, err := hf.FromConfig([]byte(strings.Replace(tiny, `"output_vocab_size": 200`, c.edit, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: error %v, want %q", c.edit, err, c.err)
		}
	}
	_, err = hf.FromConfig([]byte(strings.Replace(tiny, `"tie_word_embeddings": false`, `"tie_word_embeddings": true`, 1)), "sdpa")
	var ue *units.Error
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, `prunes a head that tie_word_embeddings ties`) ||
		!strings.Contains(ue.Hint, `"tie_word_embeddings": false`) {
		t.Errorf("tied and pruned: error %v", err)
	}
	// transformers 5.25.0 on the meta device: 106,884 unpruned (as
	// apertus-tiny.json), 90,500 unpruned and tied
	for edit, want := range map[string]int64{
		`"output_vocab_size": 256`:  106_884,
		`"output_vocab_size": null`: 106_884,
	} {
		m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"output_vocab_size": 200`, edit, 1)), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != want {
			t.Errorf("%s: %d parameters, want %d", edit, got, want)
		}
	}
	tied := strings.Replace(strings.Replace(tiny, `"output_vocab_size": 200`, `"output_vocab_size": 256`, 1), `"tie_word_embeddings": false`, `"tie_word_embeddings": true`, 1)
	m, err := hf.FromConfig([]byte(tied), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Params(); got != 90_500 {
		t.Errorf("unpruned, tied: %d parameters, want 90,500", got)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.attention_layernorm.weight", "model.layers.1.mlp.act_fn.alpha_p", "model.embed_tokens.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
	wrapper := strings.Replace(tiny, `"model_type": "apertus1p5_text"`, `"model_type": "apertus1p5"`, 1)
	_, err = hf.FromConfig([]byte(wrapper), "sdpa")
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, `model_type "apertus1p5" is not supported yet: Apertus 1.5's vision tokenizer`) ||
		!strings.Contains(ue.Hint, `"apertus1p5_text"`) {
		t.Errorf("apertus1p5: error %v", err)
	}
}
