package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestNoCacheMaskAsTransformers: a forward with neither a cache nor an
// attention_mask (use_cache=False, as gradient checkpointing forces it,
// and train(attention_mask=False)) hands SDPA a [batch, 1, seq, seq] bool
// mask and repeat_kv's copies of k and v under transformers 4.54 to 4.57
// (nn.Attention.NoCacheMask), none under 5.25.0. Measured on the CPU,
// torch 2.15.0, batch 2 of 32 tokens, the 4.57.1 wheel unpacked on
// PYTHONPATH beside tokenizers 0.22 and huggingface_hub 0.36.2:
//
//	[PYTHONPATH=tf4.57.1:deps] python tools/oracle/hf_block_saved.py CONFIG.json {1,2} 2 32 {float32,bfloat16} sdpa nocache [mask] [ckpt held]
//
// CONFIG llama-gqa-tiny.json or mistral-tiny.json (4 heads, 2 kv heads of
// 16) and, measured so in session 31 (sim/ernie4_5_moe_test.go), the dense
// ernie4_5-tiny.json in bf16 without checkpointing. saved is what autograd
// packed; under ckpt held is what the layers were handed and still hold,
// position_ids' 256 bytes among them (core.Model.PositionIDs).
// Without checkpointing 4.57.1 keeps 12,288 B a layer more in fp32
// (24,576 B: SDPA's additive bias, [2, 1, 32, 32] in the dtype, and k and
// v expanded to 4 heads); under checkpointing the layers hold the bool
// mask, 2,048 B, from the forward into the backward, and each recompute's
// copies are freed with it. An attention_mask of ones (mask) skips the
// packed-sequence check: 4.57.1 then keeps what 5.25.0 keeps.
func TestNoCacheMaskAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, precision, transformers string
		ckpt, mask                    bool
		saved, held                   []int64 // at 1 and 2 layers
	}{
		{"llama-gqa-tiny.json", "fp32", "4.57.1", false, false, []int64{424_708, 729_348}, nil},
		{"llama-gqa-tiny.json", "fp32", "5.25.0", false, false, []int64{400_132, 680_196}, nil},
		{"llama-gqa-tiny.json", "bf16", "4.57.1", false, false, []int64{271_108, 440_580}, nil},
		{"llama-gqa-tiny.json", "bf16", "5.25.0", false, false, []int64{258_820, 416_004}, nil},
		{"llama-gqa-tiny.json", "fp32", "4.57.1", true, false, []int64{132_356, 148_740}, []int64{6_400, 6_400}},
		{"llama-gqa-tiny.json", "fp32", "5.25.0", true, false, []int64{132_356, 148_740}, []int64{4_352, 4_352}},
		{"llama-gqa-tiny.json", "bf16", "4.57.1", true, false, []int64{107_780, 115_972}, []int64{4_352, 4_352}},
		{"llama-gqa-tiny.json", "bf16", "5.25.0", true, false, []int64{107_780, 115_972}, []int64{2_304, 2_304}},
		{"mistral-tiny.json", "fp32", "4.57.1", false, false, []int64{424_708, 729_348}, nil},
		{"mistral-tiny.json", "fp32", "5.25.0", false, false, []int64{400_132, 680_196}, nil},
		{"mistral-tiny.json", "bf16", "4.57.1", false, false, []int64{271_108, 440_580}, nil},
		{"mistral-tiny.json", "bf16", "5.25.0", false, false, []int64{258_820, 416_004}, nil},
		{"mistral-tiny.json", "fp32", "4.57.1", true, false, []int64{132_356, 148_740}, []int64{6_400, 6_400}},
		{"mistral-tiny.json", "fp32", "5.25.0", true, false, []int64{132_356, 148_740}, []int64{4_352, 4_352}},
		{"mistral-tiny.json", "bf16", "4.57.1", true, false, []int64{107_780, 115_972}, []int64{4_352, 4_352}},
		{"mistral-tiny.json", "bf16", "5.25.0", true, false, []int64{107_780, 115_972}, []int64{2_304, 2_304}},
		{"ernie4_5-tiny.json", "bf16", "4.57.1", false, false, []int64{273_156, 446_724}, nil},
		{"llama-gqa-tiny.json", "bf16", "4.57.1", false, true, []int64{258_820}, nil},
		{"llama-gqa-tiny.json", "bf16", "4.57.1", true, true, []int64{107_780}, []int64{2_304}},
	} {
		for i, want := range tc.saved {
			layers := int64(i + 1)
			p := hfOraclePlan(t, ropeConfig(t, tc.file, layers, nil), hf.Options{Attn: "sdpa", Transformers: tc.transformers}, tc.precision)
			p.NoAttentionMask = !tc.mask
			if tc.ckpt {
				p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
				want += tc.held[i]
			}
			r := evalPlan(t, p)
			if got := r.SavedActivations + r.SavedWeightCopies; got != want {
				t.Errorf("%s %s transformers %s ckpt %v mask %v, %d layers: memsh keeps %d bytes, transformers %d (%+d)",
					tc.file, tc.precision, tc.transformers, tc.ckpt, tc.mask, layers, got, want, got-want)
			}
		}
	}
}

// TestNoCacheMaskReleases: the mask and repeat_kv's copies come with
// 4.54 (the 4.53.x forward without an attention_mask builds no mask, and
// repeats k and v anyway) and go with 5.0, only where the forward has
// neither the cache nor an attention_mask, and torch is 2.6 or later (on
// torch 2.1 create_causal_mask drops the packed-sequence mask, and
// SDPA, without enable_gqa, gets repeat_kv's copies from every release).
func TestNoCacheMaskReleases(t *testing.T) {
	saved := func(version string, useCache, mask bool, runtime string) int64 {
		p := hfOraclePlan(t, readHF(t, "llama-gqa-tiny.json"), hf.Options{Attn: "sdpa", Transformers: version}, "bf16")
		p.UseCache, p.NoAttentionMask, p.Runtime = useCache, !mask, mustRuntime(t, runtime)
		return evalPlan(t, p).SavedActivations
	}
	const bias, copies = 2 * 32 * 32 * 2, 2 * 2 * 32 * 2 * 16 * 2 // a layer, bf16: [2, 1, 32, 32]; k and v's 2 more heads
	for _, tc := range []struct {
		version, runtime string
		useCache, mask   bool
		more             int64 // over 5.25.0's same step
	}{
		{"4.53.3", "cpu", false, false, 2 * copies},
		{"4.54.0", "cpu", false, false, 2 * (bias + copies)},
		{"4.57.6", "cpu", false, false, 2 * (bias + copies)},
		{"4.57.6", "cpu", true, false, 0},
		{"4.57.6", "cpu", false, true, 0},
		{"5.0.0", "cpu", false, false, 0},
		{"4.57.6", "cuda-2.6", false, false, 2 * (bias + copies)},
		{"4.57.6", "cuda-2.1", false, false, 0},
	} {
		if got := saved(tc.version, tc.useCache, tc.mask, tc.runtime) - saved("5.25.0", tc.useCache, tc.mask, tc.runtime); got != tc.more {
			t.Errorf("transformers %s runtime %s use_cache %v mask %v: %d bytes over 5.25.0, want %d", tc.version, tc.runtime, tc.useCache, tc.mask, got, tc.more)
		}
	}
}
