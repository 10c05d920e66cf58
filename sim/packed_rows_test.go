package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestPackedRowsAsTransformers: one packed row as DataCollatorWithFlattening
// and TRL's padding_free feed it (input_ids [1, 32] of two documents of 8
// and 24 tokens, position_ids restarting at 0 for each, no
// attention_mask; train(doc_tokens=[8, 24])), llama-gqa-tiny.json (4
// heads, 2 kv heads of 16) under transformers 5.25.0, torch 2.15.0, on the
// CPU:
//
//	python tools/oracle/packed_rows.py sim/testdata/hf/llama-gqa-tiny.json {1,2} {float32,bfloat16} {sdpa,eager} 8,24 [ckpt]
//	PYTHONPATH=tf4.57.1 python tools/oracle/packed_rows.py ... 1 float32 sdpa 8,24 [ckpt]
//
// masking_utils finds the row packed and gives SDPA a [1, 1, 32, 32] bool
// block-diagonal mask (eager a float one): SDPA keeps its additive bias
// and repeat_kv's copies of k and v in every layer (no enable_gqa with a
// mask), 12,288 B a layer more in fp32 than the same tokens as one causal
// row; eager keeps what it keeps for one causal row. saved is what
// autograd packed; held (under ckpt, every layer checkpointed) what the
// layers were handed and still hold: the mask, the rotary pair and
// position_ids, (1, 32) int64.
//
// memsh counts all of it: at batch 1 the loss's padded labels (F.pad to
// [1, 33]) keep their storage, whose [..., 1:] slice is contiguous, so
// nll_loss saves a view of 33 int64 (core's loss_labels.go).
func TestPackedRowsAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		ckpt            bool
		saved, held     []int64 // at 1 and 2 layers
		release         string  // transformers; "" 5.25.0
		missed          int64   // bytes memsh does not count
	}{
		{"fp32", "sdpa", false, []int64{214_412, 366_732}, []int64{0, 0}, "", 0},
		{"fp32", "sdpa", true, []int64{66_188, 74_380}, []int64{5_376, 5_376}, "", 0},
		{"fp32", "eager", false, []int64{226_188, 390_284}, []int64{0, 0}, "", 0},
		{"fp32", "eager", true, []int64{66_188, 74_380}, []int64{8_448, 8_448}, "", 0},
		{"bf16", "sdpa", false, []int64{136_588, 221_324}, []int64{0, 0}, "", 0},
		{"bf16", "sdpa", true, []int64{53_900, 57_996}, []int64{3_328, 3_328}, "", 0},
		{"bf16", "eager", false, []int64{158_604, 265_356}, []int64{0, 0}, "", 0},
		{"bf16", "eager", true, []int64{53_900, 57_996}, []int64{4_352, 4_352}, "", 0},
		// 4.57.1 gives SDPA the same mask through its packed-sequence check
		// (nn.Attention.NoCacheMask); it makes cache_position, (32,) int64,
		// beside the collator's position_ids and hands it to the layers too
		// (one storage with position_ids when the model makes those), 256 B
		// memsh does not count.
		{"fp32", "sdpa", false, []int64{214_412}, []int64{0}, "4.57.1", 0},
		{"fp32", "sdpa", true, []int64{66_188}, []int64{5_632}, "4.57.1", 256},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 1)
			release := tc.release
			if release == "" {
				release = "5.25.0"
			}
			p := hfOraclePlan(t, ropeConfig(t, "llama-gqa-tiny.json", layers, nil), hf.Options{Attn: tc.attn, Transformers: release}, tc.precision)
			p.Batch, p.Seq, p.TokensPerBatch, p.Docs = 1, 32, 32, []int64{8, 24}
			if tc.ckpt {
				p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			}
			want := saved + tc.held[i] - tc.missed
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s %s ckpt %v, %d layers: memsh keeps %d bytes, transformers %d (%+d)", release, tc.precision, tc.attn, tc.ckpt, layers, got, want, got-want)
			}
		}
	}
}

// TestPackedAttentionFLOPs: the attention kernels' FLOPs over one packed
// row of 8,192 tokens (Llama-3-8B, transformers 5.25.0) against the same
// tokens as one causal row. flash's varlen kernel runs each document's
// own causal triangle: the sum of l (l + 1) / 2 scores over the row's
// 8,192 x 8,192 / 2 (doc_tokens=[1024] * 8: 0.1251; [4096, 2048, 1024,
// 1024]: 0.3438). SDPA gets the [1, 1, 8192, 8192] block-diagonal mask:
// its efficient kernel computes every score, twice the causal row's
// (is_causal's half). flex (the zoo's and torchtitan's, not hf_config's):
// TestDocBlocks.
func TestPackedAttentionFLOPs(t *testing.T) {
	eightK := func(docs ...int64) []int64 { return docs }
	for _, tc := range []struct {
		attn  string
		docs  []int64
		ratio float64
	}{
		{"flash", eightK(1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024), 8 * 1024 * 1025 / 2 / (8192.0 * 8192 / 2)},
		{"flash", eightK(4096, 2048, 1024, 1024), (4096*4097/2 + 2048*2049/2 + 2*1024*1025/2) / (8192.0 * 8192 / 2)},
		{"sdpa", eightK(1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024), 2},
	} {
		flops := func(docs []int64) float64 {
			m, err := hf.FromConfigOptions(readHF(t, "llama-3-8b.json"), hf.Options{Attn: tc.attn, Transformers: "5.25.0"})
			if err != nil {
				t.Fatal(err)
			}
			p := tinyPlan(t, m)
			p.Batch, p.Seq, p.NoAttentionMask = 1, 8192, true
			if docs != nil {
				p.TokensPerBatch, p.Docs = 8192, docs
			}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			var f float64
			for _, op := range prog.Ops {
				if op.Kind != "attention" {
					continue
				}
				f += op.Flops
				want := int32(0) // transformers' flash path finds the packed row from position_ids: 3 syncs a layer
				if tc.attn == "flash" && docs != nil {
					want = 3
				}
				if op.Syncs != want {
					t.Errorf("%s %v: %s makes %d host syncs, want %d", tc.attn, docs, op.Name, op.Syncs, want)
				}
			}
			if f == 0 {
				t.Fatalf("%s: no attention op", tc.attn)
			}
			return f
		}
		if got := flops(tc.docs) / flops(nil); math.Abs(got-tc.ratio) > 1e-9 {
			t.Errorf("%s %v: attention FLOPs %.6f of one causal row's, want %.6f", tc.attn, tc.docs, got, tc.ratio)
		}
	}
}

// TestPackedRowsRefused: SDPA and eager layers run one packed row where
// transformers masks it per document (core/packing.go), and are refused
// where the documents would attend to each other: a release without
// masking_utils' packed-sequence check (4.53), 4.54-4.57 on a torch before
// 2.6 (create_causal_mask drops the mask), a forward with a cache (the
// check is skipped), and documents in padded rows (doc_tokens without a
// packed row: nothing masks them).
func TestPackedRowsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, release, runtime string
		cache, row             bool
		err                    string
	}{
		{"5.25, cache off", "5.25.0", "cuda", false, true, ""},
		{"4.57, torch 2.6+", "4.57.1", "cuda", false, true, ""},
		{"5.25, cache on", "5.25.0", "cuda", true, true, "does not look for packed rows"},
		{"4.57, torch 2.1", "4.57.1", "cuda-2.1", false, true, "drops the packed-sequence mask before torch 2.6"},
		{"4.53", "4.53.3", "cuda", false, true, "tokens_per_batch packs documents into one row, which needs flash"},
		{"documents in padded rows", "5.25.0", "cuda", false, false, "doc_tokens masks attention per document"},
	} {
		m, err := hf.FromConfigOptions(readHF(t, "llama-gqa-tiny.json"), hf.Options{Attn: "sdpa", Transformers: tc.release})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.UseCache, p.Batch, p.Seq = mustRuntime(t, tc.runtime), tc.cache, 1, 64
		if tc.row {
			p.TokensPerBatch, p.Docs = 128, []int64{64, 64}
		} else {
			p.DocTokens = 32
		}
		_, err = Evaluate(p, core.Options{})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
		}
	}
}
