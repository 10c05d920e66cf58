package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/replay"
)

// TestKVCacheAsTransformers: a training forward with use_cache on
// (train(use_cache=True): the config's default, which a plain loop leaves
// on) fills a DynamicCache with a torch.cat copy of every layer's k and v,
// which the model's output holds (nn/kv_cache.go). What transformers
// keeps, on the CPU (torch 2.15.0, transformers 5.25.0, bf16, 64 tokens):
// autograd's saved storages with the config's use_cache,
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/FILE.json LAYERS BATCH 64 bfloat16 ATTN
//
// and the cache's storages, and of those the bytes no saved tensor shares
// (the memory the cache adds while the output lives):
//
//	python tools/oracle/kv_cache.py sim/testdata/hf/FILE.json LAYERS BATCH 64 ATTN
//
// Where the kernel takes k and v as they
// are (SDPA with enable_gqa: Llama without a mask) the copies are what it
// saves: nothing added. Where it reads repeat_kv's expansion (eager; SDPA
// given Mistral's sliding-window mask) the copies are kept besides. Phi-3's
// fused qkv_proj: v becomes a copy, so the projection's output is no
// longer kept (434,444 bytes where use_cache=False keeps 459,020). memsh
// counts all of it (at batch 1 the loss's padded labels, 65 int64, whose
// slice cross-entropy saves: core's loss_labels.go).
func TestKVCacheAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, attn            string
		layers, batch         int64
		saved, cache, besides int64
	}{
		{"llama-gqa-tiny.json", "sdpa", 2, 1, 418_060, 16_384, 0},
		{"llama-gqa-tiny.json", "eager", 2, 1, 629_004, 16_384, 16_384},
		{"llama-gqa-tiny.json", "eager", 2, 2, 1_253_892, 32_768, 32_768},
		{"mistral-tiny-w16.json", "sdpa", 2, 1, 450_828, 16_384, 16_384},
		{"phi3-tiny.json", "sdpa", 2, 1, 434_444, 16_384, 0},
	} {
		m, err := hf.FromConfigOptions(ropeConfig(t, tc.file, tc.layers, nil), hf.Options{Attn: tc.attn, Transformers: "5.25.0"})
		if err != nil {
			t.Fatal(tc.file, err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.UseCache = mustRuntime(t, "cpu"), tc.batch, true
		want := tc.saved
		if got := evalPlan(t, p).SavedActivations; got != want {
			t.Errorf("%s %s, batch %d: memsh keeps %d bytes with use_cache, transformers %d (%+d)", tc.file, tc.attn, tc.batch, got, want, got-want)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		saved := replay.SavedAtForwardEnd(prog, p)
		var cache, besides int64
		for _, v := range prog.HeldForward {
			cache += prog.Values[v].Bytes
			if !saved[v] {
				besides += prog.Values[v].Bytes
			}
		}
		if cache != tc.cache || besides != tc.besides {
			t.Errorf("%s %s, batch %d: the cache holds %d bytes, %d of them no saved tensor's; transformers %d and %d",
				tc.file, tc.attn, tc.batch, cache, besides, tc.cache, tc.besides)
		}
	}
	// Under checkpointing transformers turns use_cache off: nothing held.
	m, err := hf.FromConfigOptions(ropeConfig(t, "llama-gqa-tiny.json", 2, nil), hf.Options{Attn: "eager", Transformers: "5.25.0"})
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPlan(t, m)
	p.UseCache = true
	if p.Checkpoint, err = core.ParseCheckpoint("full"); err != nil {
		t.Fatal(err)
	}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	if len(prog.HeldForward)+len(prog.HeldBackward) != 0 {
		t.Errorf("checkpointed with use_cache: %d values held by the output, want none", len(prog.HeldForward)+len(prog.HeldBackward))
	}
}
