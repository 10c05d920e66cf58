package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What RoBERTa's and XLM-RoBERTa's embeddings save for their token types
// and positions, by release, handed no token_type_ids (their tokenizers'
// model_input_names are input_ids and attention_mask), against
// transformers on PyTorch 2.15.0 (the CPU, fp32, sdpa, 2 samples of 32
// tokens, 1 layer and 2; roberta-tiny.json: 66 positions):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/{roberta,xlm-roberta}-tiny.json {1,2} 2 32 float32 sdpa v
//	PYTHONPATH=/tmp/cm31/tf4571:/tmp/cm31/deps:/tmp/tt_deps python ...   # 4.57.1 (tt_deps: requests, huggingface-hub<1.0)
//
// 5.25.0 saves three [2, 32] int64 storages of 512 bytes: the input ids,
// the positions (create_position_ids_from_input_ids) and the token types
// gathered from the buffer at those positions (a new tensor: 5.0 on,
// tokenTypeGatherSince). 4.57.1 saves the buffer itself for the token
// types (token_type_ids[:, :32].expand(2, 32), a view: its storage is the
// whole [1, 66] buffer, 528 bytes), which memsh counts as the module's
// buffer, not as a saved tensor: viewed.
func TestTokenTypeIDsAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, release string
		viewed        int64
		one, two      int64
	}{
		{"roberta-tiny.json", "5.25.0", 0, 316_420, 515_076},
		{"roberta-tiny.json", "4.57.1", 8 * 66, 316_436, 515_092},
		{"xlm-roberta-tiny.json", "5.25.0", 0, 316_420, 515_076},
		{"xlm-roberta-tiny.json", "4.57.1", 8 * 66, 316_436, 515_092},
	} {
		opts := hf.Options{Attn: "sdpa", Transformers: tc.release}
		one := hfSaved(t, tc.file, 1, "fp32", opts, false) + tc.viewed
		two := hfSaved(t, tc.file, 2, "fp32", opts, false) + tc.viewed
		if one != tc.one || two != tc.two {
			t.Errorf("%s under %s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.file, tc.release, one, one-tc.one, two, two-tc.two)
		}
	}
}
