package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// RoBERTa's and XLM-RoBERTa's parameter counts, from their config.json
// files (FacebookAI/roberta-base, roberta-large, xlm-roberta-base,
// xlm-roberta-large, BAAI/bge-m3, BAAI/bge-reranker-v2-m3), each checked
// on the meta device under transformers 5.25.0 and torch 2.15.0
// (AutoConfig.for_model, then the class under torch.device("meta")):
//
//   - roberta-base: RobertaForMaskedLM 124,697,433, the hub's safetensors
//     total (F32 124,697,433 besides 514 I64, the position_ids buffer;
//     huggingface.js's safetensors test quotes it); RobertaModel
//     124,645,632.
//   - roberta-large: RobertaForMaskedLM 355,412,057; with a 2-label
//     RobertaClassificationHead 355,361,794 (no pooler: dense and
//     out_proj on the first token).
//   - xlm-roberta-base and -large: XLMRobertaForMaskedLM 278,295,186 and
//     560,142,482 (the figures a public XGLM/XLM-R comparison script lists).
//   - bge-m3: XLMRobertaModel with its pooler, 567,754,752, as MTEB's
//     model metadata quotes it.
//   - bge-reranker-v2-m3: XLMRobertaForSequenceClassification with one
//     label, 567,755,777 (public RAG start-up logs quote it): bge-m3 less
//     the pooler plus the head's dense and a 1-wide out_proj.
func TestRobertaParams(t *testing.T) {
	checkArchParams(t, []archParams{
		{"roberta-base.json", "", 124_697_433},
		{"roberta-base.json", "RobertaModel", 124_645_632},
		{"roberta-base.json", "RobertaForSequenceClassification", 124_647_170},
		{"roberta-base.json", "RobertaForTokenClassification", 124_056_578},
		{"roberta-large.json", "", 355_412_057},
		{"roberta-large.json", "RobertaForSequenceClassification", 355_361_794},
		{"xlm-roberta-base.json", "", 278_295_186},
		{"xlm-roberta-large.json", "", 560_142_482},
		{"xlm-roberta-large.json", "XLMRobertaModel", 559_890_432},
		{"bge-m3.json", "", 567_754_752},
		{"bge-reranker-v2-m3.json", "", 567_755_777},
		{"roberta-tiny.json", "", 83_968},
		{"roberta-tiny-cls.json", "", 83_907},
		{"xlm-roberta-tiny.json", "", 83_968},
	})
}

// archParams is the parameter count of the model class arch ("" = the
// config's architectures[0]) built from a config file.
type archParams struct {
	file, arch string
	want       int64
}

// checkArchParams checks memsh's count for each row (sdpa).
func checkArchParams(t *testing.T, rows []archParams) {
	t.Helper()
	for _, tc := range rows {
		m, err := hf.FromConfigArch(readHF(t, tc.file), "sdpa", tc.arch)
		if err != nil {
			t.Errorf("%s %s: %v", tc.file, tc.arch, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s %s: %d parameters, want %d (%+d)", tc.file, tc.arch, got, tc.want, got-tc.want)
		}
	}
}

// What RoBERTa keeps for backward, against transformers 5.25.0 on PyTorch
// 2.15.0 (/work/venv-t, the CPU, no autocast): roberta-tiny.json (64 wide,
// 4 heads, intermediate 128, vocab 128, 66 positions, pad_token_id 1,
// type_vocab_size 1, no dropout), RobertaForMaskedLM; roberta-tiny-cls.json
// the same as a 3-label RobertaForSequenceClassification; xlm-roberta-tiny
// the same as XLMRobertaForMaskedLM (the same code renamed); 2 samples of
// 32 tokens, 1 layer and 2:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/{roberta,roberta-tiny-cls,xlm-roberta}-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// The harness gives the masked LM a copy of the ids as labels and the
// classifier a class a sample. These configs have no dropout (the
// dropout rows below measure the masks, eager): on the CPU
// at::dropout is _dropout (Dropout.cpp: the fused native_dropout, with its
// bool mask, is taken on CUDA only), whose mask is a tensor of the input's
// dtype, and SDPA with dropout runs the math kernel there; memsh replays
// the CUDA kernels. With dropout 0 the classifier's dense reads
// hidden_states[:, 0] in place (nn.Pooler's doc), so the last hidden state
// stays saved.
func TestRobertaSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"roberta-tiny.json", "fp32", "sdpa", 316_420, 515_076},
		{"roberta-tiny.json", "bf16", "sdpa", 159_746, 259_586},
		{"roberta-tiny.json", "fp32", "eager", 348_164, 578_564},
		{"roberta-tiny.json", "bf16", "eager", 175_106, 290_306},
		{"roberta-tiny-cls.json", "fp32", "sdpa", 234_028, 432_684},
		{"roberta-tiny-cls.json", "bf16", "sdpa", 118_302, 218_142},
		{"roberta-tiny-cls.json", "fp32", "eager", 265_772, 496_172},
		{"roberta-tiny-cls.json", "bf16", "eager", 133_662, 248_862},
		{"xlm-roberta-tiny.json", "fp32", "sdpa", 316_420, 515_076},
		{"xlm-roberta-tiny.json", "bf16", "sdpa", 159_746, 259_586},
	})
}

// With the published dropouts (roberta-tiny-cls-dropout.json:
// hidden_dropout_prob and attention_probs_dropout_prob 0.1, so
// classifier_dropout too) a layer keeps three masks more: the attention
// probabilities' (2 x 4 heads x 32 x 32) and the two hidden dropouts'
// (2 x 32 x 64 each), 16,384 elements; before the layers the embeddings'
// (2 x 32 x 64), and the classification head's two, on the first token
// (2 x 64) and before out_proj (2 x 64: nn.Pooler.InDropout), 4,352.
// dense then reads the dropped-out copy, not the last hidden state:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/roberta-tiny-cls-dropout.json {1,2} 2 32 {float32,bfloat16} eager nocache
//
// fp32 366,124 / 694,828, bf16 183,838 / 348,190 (checkCPUDropout: the
// CPU's masks are the input's dtype, CUDA's bool).
func TestRobertaDropoutMasks(t *testing.T) {
	checkCPUDropout(t, "roberta-tiny-cls-dropout.json", 2*4*32*32+2*2*32*64, 2*32*64+2*2*64, []cpuDropout{
		{"fp32", 4, 366_124, 694_828},
		{"bf16", 2, 183_838, 348_190},
	})
}

// BERT's own layers, which RoBERTa's share, against the same harness:
// bert-tiny.json (BertForMaskedLM, dropouts 0.1, 64 positions), masks as
// above less the classification head's, the forward handed
// token_type_ids as BERT's tokenizer makes them ([2, 32] int64):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/bert-tiny.json {1,2} 2 32 {float32,bfloat16} eager nocache tokentypes
//
// fp32 462,852 / 791,556, bf16 232,450 / 396,802 under 5.25.0 and (fp32)
// 4.57.1 alike. Of these, 512 bytes are the position_ids buffer ([1, 64]
// int64), which the position lookup saves as a view
// (position_ids[:, :32]) and memsh counts as the module's buffer:
// bertPositionBuffer. Handed none, 5.25.0 saves a [1, 32] gather of the
// token_type_ids buffer instead of the [2, 32] input (256 bytes fewer:
// 462,596 / 791,300; not modelled: buildBERT's doc).
func TestBERTDropoutMasks(t *testing.T) {
	const bertPositionBuffer = 8 * 64
	checkCPUDropout(t, "bert-tiny.json", 2*4*32*32+2*2*32*64, 2*32*64, []cpuDropout{
		{"fp32", 4, 462_852 - bertPositionBuffer, 791_556 - bertPositionBuffer},
		{"bf16", 2, 232_450 - bertPositionBuffer, 396_802 - bertPositionBuffer},
	})
}

// With every layer checkpointed (use_reentrant=False), 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/roberta-tiny.json {1,2,3} 2 32 {float32,bfloat16} sdpa nocache ckpt held
//
// Each layer more keeps its input (16,384 bytes in fp32, 8,192 in bf16);
// the layers are handed nothing else that lives (held 0: no mask, no
// rotary tables).
func TestRobertaCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		saved     [3]int64
	}{
		{"fp32", [3]int64{134_148, 150_532, 166_916}},
		{"bf16", [3]int64{68_098, 76_290, 84_482}},
	} {
		for i, want := range tc.saved {
			if got := graniteSaved(t, "roberta-tiny.json", i+1, tc.precision, "sdpa", true); got != want {
				t.Errorf("%s, %d layers: %d saved, want %d (%+d)", tc.precision, i+1, got, want, got-want)
			}
		}
	}
}

// RoBERTa's positions start at pad_token_id + 1: roberta-base's 514 rows
// serve 512 tokens, and a pad_token_id that leaves none is refused
// naming the key.
func TestRobertaPositions(t *testing.T) {
	m, err := hf.FromConfig(readHF(t, "roberta-base.json"), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	for _, tc := range []struct {
		seq int64
		err string
	}{
		{512, ""},
		{513, "seq=513 exceeds the 512 learned positions of this model"},
	} {
		p.Seq = tc.seq
		_, err := Evaluate(p, core.Options{})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("seq %d: %v", tc.seq, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("seq %d: got %v, want an error containing %q", tc.seq, err, tc.err)
		}
	}
	bad := strings.Replace(string(readHF(t, "roberta-tiny.json")), `"pad_token_id": 1`, `"pad_token_id": 65`, 1)
	if _, err := hf.FromConfig([]byte(bad), "sdpa"); err == nil || !strings.Contains(err.Error(), "max_position_embeddings") {
		t.Errorf("pad_token_id 65 of 66 positions: got %v, want an error naming max_position_embeddings", err)
	}
	if _, err := hf.FromConfigOptions(readHF(t, "xlm-roberta-base.json"), hf.Options{Attn: "flash", Transformers: "4.57.1"}); err == nil || !strings.Contains(err.Error(), `no flash-attention path for model_type "xlm-roberta" (from 5.0)`) {
		t.Errorf("xlm-roberta flash under 4.57.1: got %v", err)
	}
}
