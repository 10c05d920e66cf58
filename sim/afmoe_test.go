package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// What AFMoE's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, experts_implementation
// grouped_mm, from_pretrained's fp32 keeps applied, no attention_mask):
// afmoe-tiny.json (64 wide, 4 heads of 16, 2 kv heads; layer 0 sliding
// over 16 keys with a dense mlp of 128, layer 1 full without rope, layer 2
// sliding, both MoE: 8 experts of 32, top 2, 1 shared expert of 32;
// mup_enabled), 2 samples of 32 tokens, 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/afmoe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// Per layer: the four Olmo2RMSNorms' fp32 rows, q_norm's and k_norm's
// over each head, the rotary products on the sliding layers only,
// gate_proj's sigmoid and the gated product, the kernel's saves (SDPA's
// additive bias on the sliding layers, whole over the batch), and on the
// MoE layers the router's fp32 scores and the grouped experts' and the
// shared expert's saves.
//
// With every layer checkpointed (use_reentrant=False; the same command
// with ckpt held): each layer's input and the loss's, SDPA and eager alike,
// plus what the model's forward hands every checkpointed layer (held):
// position_ids (1, 32) int64, 256 bytes, and the rotary cos and sin (1,
// 32, 16) in the model's dtype; under SDPA the sliding layers' bool mask,
// one (1, 1, 32, 32) storage expanded over the batch, 1,024 bytes (the
// full layers run is_causal without one): 5,376 bytes in fp32, 3,328 in
// bf16. Eager attention gets a float mask a layer type instead, (2, 1,
// 32, 32) in the model's dtype: 12,544 / 20,736 / 20,736 in fp32 (the
// full layers' from 2 layers on), 6,400 / 10,496 / 10,496 in bf16.
func TestAfmoeSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		ckpt            bool
		saved, held     [3]int64
	}{
		{"fp32", "sdpa", false, [3]int64{574212, 1044004, 1538372}, [3]int64{}},
		{"fp32", "eager", false, [3]int64{597764, 1115684, 1633604}, [3]int64{}},
		{"bf16", "sdpa", false, [3]int64{428804, 759332, 1102148}, [3]int64{}},
		{"bf16", "eager", false, [3]int64{472836, 859684, 1246532}, [3]int64{}},
		{"fp32", "sdpa", true, [3]int64{132356, 148740, 165124}, [3]int64{5376, 5376, 5376}},
		{"fp32", "eager", true, [3]int64{132356, 148740, 165124}, [3]int64{12544, 20736, 20736}},
		{"bf16", "sdpa", true, [3]int64{115972, 124164, 132356}, [3]int64{3328, 3328, 3328}},
		{"bf16", "eager", true, [3]int64{115972, 124164, 132356}, [3]int64{6400, 10496, 10496}},
	} {
		for i, saved := range tc.saved {
			p := hfOraclePlan(t, ropeConfig(t, "afmoe-tiny.json", int64(i+1), nil), hf.Options{Attn: tc.attn, Transformers: "5.25.0"}, tc.precision)
			p.NoAttentionMask = true
			if tc.ckpt {
				p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			}
			want := saved + tc.held[i]
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s ckpt %v, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, tc.ckpt, i+1, got, want, got-want)
			}
		}
	}
}

// AFMoE's parameters, which transformers 5.25.0 counts on the meta device
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel; torch 2.15.0) for trinity-mini.json (26,123,974,400, 3,840 of them
// without gradient: 30 MoE layers' expert_bias of 128) and
// trinity-nano.json (6,120,003,328, 6,912 without: 54 x 128); the files
// carry the published sizes as public test code spells them
// (tokenspeed's afmoe config test for Trinity-Mini, its layer_types as
// written; the neuronx-distributed-inference Trinity port's NANO_CONFIG,
// "matches arcee-ai/Trinity-Nano-Preview/config.json"), the hub not being
// reachable from here. afmoe-tiny.json: 219,056 (16 without).
func TestAfmoeParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"trinity-mini.json": 26_123_974_400,
		"trinity-nano.json": 6_120_003_328,
		"afmoe-tiny.json":   219_056,
	})
	for file, frozen := range map[string]int64{"trinity-mini.json": 3_840, "trinity-nano.json": 6_912, "afmoe-tiny.json": 16} {
		m, err := hf.FromConfig(readHF(t, file), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, pa := range prog.Params {
			if !pa.Trainable {
				n += core.Numel(pa.Shape)
			}
		}
		if n != frozen {
			t.Errorf("%s: %d parameters without gradient, transformers %d", file, n, frozen)
		}
	}
}
