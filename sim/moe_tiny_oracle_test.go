package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestMoETinySavesAsTransformers: what the tiny Mixtral, Qwen2-MoE and
// PhiMoE configs keep for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, 2 samples of 32 tokens,
// use_cache=False):
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/FILE.json LAYERS 2 32 {float32,bfloat16} {sdpa,eager} nocache [eagerexperts]
//
// "kept", with eagerexperts less the views the loop takes of gate_up_proj
// and down_proj for experts e > 0, which the harness counts (the whole
// 3-D parameters once a layer, 4 x 64 x 64 + 4 x 64 x 32 elements:
// TestGraniteMoeSharedEagerExpertsAsTransformers). PhiMoE's router is
// sparsemixer (nn/moe_sparsemixer.go): memsh built Mixtral's softmax
// router for it, whose saves were the same bytes in bf16 by chance and
// 1,280 bytes a layer short in fp32; and Phi-3.5-MoE's
// input_jitter_noise (0.01; set here on the tiny config, with
// router_jitter_noise 0.01 as the hub's) multiplies the block's input by
// noise twice, each noise saved: 8,192 bytes a layer that memsh left out.
func TestMoETinySavesAsTransformers(t *testing.T) {
	const views = (4*64*64 + 4*64*32) * 2 // bf16, one layer's expert parameters
	jitter := map[string]any{"input_jitter_noise": 0.01, "router_jitter_noise": 0.01}
	for _, tc := range []struct {
		file             string
		set              map[string]any
		prec, attn, impl string
		layers, want     int64
	}{
		{"mixtral-tiny.json", nil, "bf16", "sdpa", "", 1, 232_468},
		{"mixtral-tiny.json", nil, "bf16", "sdpa", "", 2, 396_068},
		{"mixtral-tiny.json", nil, "fp32", "eager", "", 2, 756_516},
		{"mixtral-tiny.json", nil, "bf16", "sdpa", "eager", 2, 525_060 - 2*views},
		{"qwen2_moe-tiny.json", nil, "bf16", "sdpa", "", 1, 264_340},
		{"qwen2_moe-tiny.json", nil, "bf16", "sdpa", "", 2, 459_812},
		{"qwen2_moe-tiny.json", nil, "fp32", "eager", "", 2, 886_564},
		{"qwen2_moe-tiny.json", nil, "bf16", "sdpa", "eager", 2, 588_804 - 2*views},
		{"phimoe-tiny.json", nil, "bf16", "sdpa", "", 1, 183_060},
		{"phimoe-tiny.json", nil, "bf16", "sdpa", "", 2, 313_636},
		{"phimoe-tiny.json", nil, "fp32", "sdpa", "", 1, 326_676},
		{"phimoe-tiny.json", nil, "fp32", "sdpa", "", 2, 582_180},
		{"phimoe-tiny.json", nil, "bf16", "eager", "", 2, 426_276},
		{"phimoe-tiny.json", nil, "fp32", "eager", "", 2, 678_436},
		{"phimoe-tiny.json", nil, "bf16", "sdpa", "eager", 2, 442_628 - 2*views},
		{"phimoe-tiny.json", jitter, "bf16", "sdpa", "", 1, 199_444},
		{"phimoe-tiny.json", jitter, "bf16", "sdpa", "", 2, 346_404},
		// sparsemixer picks two experts whatever num_experts_per_tok says
		// (transformers reads and checks it nowhere for PhiMoE; 17 of 4
		// experts builds and trains)
		{"phimoe-tiny.json", map[string]any{"num_experts_per_tok": 17}, "bf16", "sdpa", "", 2, 313_636},
	} {
		m, err := hf.FromConfigOptions(ropeConfig(t, tc.file, tc.layers, tc.set), hf.Options{Attn: tc.attn, Transformers: "5.25.0", Experts: tc.impl})
		if err != nil {
			t.Fatal(tc.file, err)
		}
		p := tinyPlan(t, m)
		if p.Precision, err = core.LookupPrecision(tc.prec); err != nil {
			t.Fatal(err)
		}
		p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 32
		if got := evalPlan(t, p).SavedActivations; got != tc.want {
			t.Errorf("%s %v %s %s experts=%q, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.file, tc.set, tc.prec, tc.attn, tc.impl, tc.layers, got, tc.want, got-tc.want)
		}
	}
	// Every layer checkpointed (hf_block_saved.py ... bfloat16 sdpa nocache
	// ckpt held): "kept" plus "held", the arguments the checkpointed layers
	// hold out of autograd's sight (position_ids and the rotary cos and
	// sin, 2,304 bytes); the jitter's noise is drawn again in the recompute,
	// nothing kept.
	for _, tc := range []struct {
		file       string
		set        map[string]any
		kept, held int64
	}{
		{"mixtral-tiny.json", nil, 83_204, 2_304},
		{"qwen2_moe-tiny.json", nil, 83_204, 2_304},
		{"phimoe-tiny.json", nil, 66_820, 2_304},
		{"phimoe-tiny.json", jitter, 66_820, 2_304},
	} {
		m, err := hf.FromConfigOptions(ropeConfig(t, tc.file, 2, tc.set), hf.Options{Attn: "sdpa", Transformers: "5.25.0"})
		if err != nil {
			t.Fatal(tc.file, err)
		}
		p := tinyPlan(t, m)
		if p.Checkpoint, err = core.ParseCheckpoint("full"); err != nil {
			t.Fatal(err)
		}
		p.Runtime, p.Batch, p.Seq = mustRuntime(t, "cpu"), 2, 32
		if got, want := evalPlan(t, p).SavedActivations, tc.kept+tc.held; got != want {
			t.Errorf("%s %v checkpointed: memsh keeps %d bytes, transformers %d (%+d)", tc.file, tc.set, got, want, got-want)
		}
	}
}
