package sim

import (
	"strings"
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

// What BERT's token-type lookup saves, with the batch's token_type_ids
// (BertTokenizer's, [batch, seq] int64: the default) and without them
// (hf_config(token_type_ids=False), hf.Options.NoTokenTypes), against
// tools/oracle/loss_labels.py on bert-tiny.json (one layer, fp32, CPU,
// torch 2.15.0, 16 tokens; every int64 storage the step made, and which
// autograd saved):
//
//	/work/venv-t/bin/python tools/oracle/loss_labels.py sim/testdata/hf/bert-tiny.json {1,2} 16 [token_types]
//	PYTHONPATH=/tmp/cm31/tf4571:/tmp/cm31/deps:/tmp/tt_deps ... bert-tiny.json {1,2} 16   # 4.57.1
//
// 5.25.0 without them gathers a new [1, 16] int64 (128 B) from the
// token_type_ids buffer at batch 1 and 2 alike, saved by the lookup; with
// them it makes none and the lookup saves the batch's [batch, 16]. 4.57.1
// without them makes none (buffer[:, :16].expand(batch, 16), a view of
// the buffer, which memsh counts as the module's buffer).
func TestBERTTokenTypesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		release    string
		tokenTypes bool
		batch      int64
		saved      int64 // bytes the token-type lookup saves
	}{
		{"5.25.0", true, 1, 128},
		{"5.25.0", true, 2, 256},
		{"5.25.0", false, 1, 128},
		{"5.25.0", false, 2, 128},
		{"4.57.1", false, 2, 0},
	} {
		m, err := hf.FromConfigOptions(readHF(t, "bert-tiny.json"), hf.Options{Attn: "sdpa", Transformers: tc.release, NoTokenTypes: !tc.tokenTypes})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Batch, p.Seq = tc.batch, 16
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var saved int64
		for i := range prog.Ops {
			op := &prog.Ops[i]
			if op.Kind == "embedding" && strings.HasSuffix(op.Module, "token_type_embeddings") {
				for _, v := range op.Saved {
					saved += prog.Values[v].Bytes
				}
			}
		}
		if saved != tc.saved {
			t.Errorf("transformers %s, token_type_ids %v, batch %d: the token-type lookup saves %d bytes, want %d", tc.release, tc.tokenTypes, tc.batch, saved, tc.saved)
		}
	}
	if _, err := hf.FromConfigOptions(readHF(t, "roberta-tiny.json"), hf.Options{Attn: "sdpa", NoTokenTypes: true}); err == nil || !strings.Contains(err.Error(), "token_type_ids=False") {
		t.Errorf("roberta with NoTokenTypes: %v, want the token_type_ids=False refusal", err)
	}
}
