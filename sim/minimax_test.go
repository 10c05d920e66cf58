package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// MiniMax's parameters, transformers 5.25.0 on the meta device:
// minimax-tiny.json (64 wide; lightning, softmax and lightning layers; 4
// heads of 16 over 2 kv heads; 8 experts of 32, 2 a token) 235,584;
// minimax-class-defaults.json, MiniMaxConfig()'s defaults written out
// (32 layers of 4096 alternating softmax and lightning attention, 32
// heads of 128, 8 kv heads, 8 experts of 14,336, 2 a token, 32,000
// untied embeddings; the published config.json was not at hand)
// 47,373,946,880. Each:
//
//	with torch.device("meta"): MiniMaxForCausalLM(AutoConfig.for_model(**json.load(f)))
func TestMiniMaxParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"minimax-tiny.json":           235_584,
		"minimax-class-defaults.json": 47_373_946_880,
	})
}

// minimaxBuffers is what the harness counts of the lightning layers'
// decay buffers among the saved tensors: diagonal_decay [1, 4, 16, 16],
// query_decay and key_decay [4, 16, 1] a layer (minimax-tiny.json: 4
// heads, block_size 16), in the model's dtype, which the products save
// and memsh counts with the model's buffers.
func minimaxBuffers(lightning int64, precision string) int64 {
	size := int64(4)
	if precision == "bf16" {
		size = 2
	}
	return lightning * (4*16*16 + 2*4*16) * size
}

// What MiniMax keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained):
// minimax-tiny.json cut to 1, 2 and 3 layers (lightning; + softmax; +
// lightning), BATCH samples of SEQ tokens, blocks of 16:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/minimax-tiny.json {1,2,3} BATCH SEQ {float32,bfloat16} {sdpa,eager} nocache keepfp32 [ckpt held]
//
// The harness's kept bytes, less the decay buffers the products save
// (minimaxBuffers). 2 x 32 tokens: two whole blocks, q, k and v copied
// for each matmul (batch and heads above 1); 1 x 32: the reshapes are
// views, the activated qkv kept once; 2 x 40: two blocks and a part
// one, the middle block's exp(-slope_rate x 16) kept ([4, 1, 1]). The
// softmax layer's figures differ by attn; the lightning ones do not.
func TestMiniMaxSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		batch, seq      int64
		kept            [3]int64 // the harness's, at 1, 2 and 3 layers; 0: not measured
	}{
		{"fp32", "sdpa", 2, 32, [3]int64{595_748, 887_364, 1_367_140}},
		{"fp32", "eager", 2, 32, [3]int64{595_748, 935_492, 1_415_268}},
		{"bf16", "sdpa", 2, 32, [3]int64{368_164, 534_852, 803_428}},
		{"bf16", "eager", 2, 32, [3]int64{368_164, 591_172, 859_748}},
		{"fp32", "sdpa", 1, 32, [3]int64{296_108, 443_980, 682_092}},
		{"fp32", "sdpa", 2, 40, [3]int64{759_924, 1_124_436, 1_739_396}},
		{"bf16", "sdpa", 1, 40, [3]int64{230_996, 0, 505_212}},
	} {
		for i, kept := range tc.kept {
			if kept == 0 {
				continue
			}
			layers := i + 1
			p := hfSavedPlan(t, "minimax-tiny.json", layers, tc.precision, hf.Options{Attn: tc.attn}, false)
			p.Batch, p.Seq = tc.batch, tc.seq
			want := kept - minimaxBuffers(int64(1+i/2), tc.precision)
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s %d x %d, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, tc.batch, tc.seq, layers, got, want, got-want)
			}
		}
	}
}

// Under full checkpointing (ckpt held, fp32 sdpa, 2 x 32) the step keeps
// each layer's input and the loss's, 132,356, 148,740 and 165,124 bytes
// at 1, 2 and 3 layers, and holds position_ids (256 B) and the rotary
// pair (2 x 2,048 B), 4,352 bytes: MiniMaxModel makes them once a
// forward and hands them to every layer. With no softmax layer (the
// model cut to its first, lightning, layer) no layer reads the pair,
// which memsh then does not make: 4,096 bytes short there.
func TestMiniMaxCheckpointSavesAsTransformers(t *testing.T) {
	for i, tc := range []struct{ saved, held, short int64 }{
		{132_356, 4_352, 4_096},
		{148_740, 4_352, 0},
		{165_124, 4_352, 0},
	} {
		want := tc.saved + tc.held - tc.short
		if got := graniteSaved(t, "minimax-tiny.json", i+1, "fp32", "sdpa", true); got != want {
			t.Errorf("%d layers: memsh keeps %d bytes, transformers %d (%+d)", i+1, got, want, got-want)
		}
	}
}

// minimax under 5.14 is refused (its lightning layers take the 4-D
// causal mask); sliding_window, router_jitter_noise and an unknown layer
// type are refused naming the key; without layer_types the layers
// alternate, softmax first (MiniMaxConfig.__post_init__); the names are
// transformers'.
func TestMiniMaxConfig(t *testing.T) {
	tiny := string(readHF(t, "minimax-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "5.14.0"})
	if err == nil || !strings.Contains(err.Error(), `model_type "minimax" needs transformers 5.15 or later`) {
		t.Errorf("transformers 5.14.0: error %v, want one naming 5.15", err)
	}
	for _, tc := range []struct{ old, new, err string }{
		{`"router_jitter_noise": 0.0`, `"router_jitter_noise": 0.01`, `"router_jitter_noise" = 0.01 is not modelled`},
		{`"rope_theta"`, `"sliding_window": 4096, "rope_theta"`, `"sliding_window" is not modelled for model_type "minimax"`},
		{`"full_attention", "linear`, `"sliding_attention", "linear`, `"layer_types" names an attention type memsh does not know`},
	} {
		if _, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.old, tc.new, 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.new, err, tc.err)
		}
	}
	checkHasParams(t, strings.Replace(tiny, `"layer_types": ["linear_attention", "full_attention", "linear_attention"],`, "", 1),
		"model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.qkv_proj.weight", "model.layers.2.self_attn.o_proj.weight")
	checkHasParams(t, tiny, "model.layers.0.self_attn.qkv_proj.weight", "model.layers.0.self_attn.output_gate.weight",
		"model.layers.0.self_attn.norm.weight", "model.layers.0.self_attn.out_proj.weight", "model.layers.1.self_attn.q_proj.weight",
		"model.layers.1.mlp.gate.weight", "model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj", "lm_head.weight")
}
