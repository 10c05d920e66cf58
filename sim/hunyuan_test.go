package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// Hunyuan-7B's parameters: 7,504,568,320 (the card's 7.5B), which
// transformers 5.25.0 counts on the meta device for
// hunyuan-7b-instruct.json (AutoModelForCausalLM.from_config under
// torch.device("meta"), summing numel; the published sizes, 32 layers of
// 4096, 32 heads, 8 kv heads, intermediate 14336, 128,167 tied
// embeddings, with "head_dim": 128 added: transformers 5.25.0 cannot
// build the published config without it, HunYuanDenseV1Config's head_dim
// defaulting to None). hunyuan_v1_dense-tiny.json: 90,496.
func TestHunyuanDenseParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"hunyuan-7b-instruct.json":   7_504_568_320,
		"hunyuan_v1_dense-tiny.json": 90_496,
	})
}

// What Hunyuan's dense decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast):
// hunyuan_v1_dense-tiny.json (64 wide, 4 heads of 16, 2 kv heads,
// intermediate 128), 2 samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hunyuan_v1_dense-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// Qwen3's saves with the per-head norms after the rotary embedding
// (query_layernorm, key_layernorm) instead of before it: the norms keep
// the rotated q and k where Qwen3's keep the projections' outputs, the
// same bytes. Under full checkpointing: TestCheckpointHoldsForwardOnceValues.
func TestHunyuanDenseSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"hunyuan_v1_dense-tiny.json", "fp32", "sdpa", 450_820, 781_572},
		{"hunyuan_v1_dense-tiny.json", "fp32", "eager", 498_948, 877_828},
		{"hunyuan_v1_dense-tiny.json", "bf16", "sdpa", 297_220, 492_804},
		{"hunyuan_v1_dense-tiny.json", "bf16", "eager", 353_540, 605_444},
	})
}

// hunyuan_v1_dense without head_dim is refused naming it (transformers
// 5.25.0 fails), as is a release before 4.55.
func TestHunyuanDenseConfig(t *testing.T) {
	tiny := string(readHF(t, "hunyuan_v1_dense-tiny.json"))
	if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"head_dim": 16,`, "", 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), `"head_dim" must be given`) {
		t.Errorf("no head_dim: error %v", err)
	}
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.55.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "hunyuan_v1_dense" needs transformers 4.56 or later`) {
		t.Errorf("transformers 4.55.4: error %v, want one naming 4.56", err)
	}
}

// Hunyuan-A13B's parameters: 80,393,183,232 (the card's "80 billion
// total"), which transformers 5.25.0 counts on the meta device for
// hunyuan-a13b-instruct.json (the published config.json's sizes, 32
// layers of 4096, 32 heads of 128, 8 kv heads, 64 experts of 3072 and a
// shared MLP of 3072 in every layer, 128,167 tied embeddings, with
// "head_dim": 128 added as for Hunyuan-7B; tencent's config.json,
// written for its remote code, names it attention_head_dim).
// hunyuan_v1_moe-tiny.json: 152,960.
func TestHunyuanMoEParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"hunyuan-a13b-instruct.json": 80_393_183_232,
		"hunyuan_v1_moe-tiny.json":   152_960,
	})
}

// What Hunyuan's MoE decoder layers keep for backward, against
// transformers 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, loaded by
// from_pretrained): hunyuan_v1_moe-tiny.json (64 wide, 4 heads of 16, 2
// kv heads, 8 experts of 32 and a shared MLP of 32, 2 a token), 2 samples
// of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hunyuan_v1_moe-tiny.json {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// The dense model's attention; the gate's wg stays fp32 in bf16 (an
// nn.Linear built with dtype=torch.float32), so it keeps the fp32 copy
// of its input, fp32 logits, probabilities and top-k weights, and each
// expert's output is weighted in fp32 before the cast back.
func TestHunyuanMoESavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"hunyuan_v1_moe-tiny.json", "fp32", "sdpa", 491_044, 862_020},
		{"hunyuan_v1_moe-tiny.json", "fp32", "eager", 539_172, 958_276},
		{"hunyuan_v1_moe-tiny.json", "bf16", "sdpa", 337_444, 573_252},
		{"hunyuan_v1_moe-tiny.json", "bf16", "eager", 393_764, 685_892},
	})
}

// Hunyuan-A13B's config.json sets attention_dropout 0.1, which drops the
// attention probabilities only (eager_attention_forward's dropout; no
// dropout after o_proj): hunyuan_v1_moe-tiny-dropout.json keeps one mask
// more a layer, 2 x 4 heads x 32 x 32.
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/hunyuan_v1_moe-tiny-dropout.json {1,2} 2 32 {float32,bfloat16} eager nocache keepfp32
//
// fp32 604,708 / 1,089,348, bf16 410,148 / 718,660 (checkCPUDropout).
func TestHunyuanMoEAttentionDropout(t *testing.T) {
	checkCPUDropout(t, "hunyuan_v1_moe-tiny-dropout.json", 2*4*32*32, 0, []cpuDropout{
		{"fp32", 4, 604_708, 1_089_348},
		{"bf16", 2, 410_148, 718_660},
	})
}

// Under transformers 4.57.1 (the 4.57.1 wheel unpacked on PYTHONPATH with
// requests, huggingface_hub 0.36.0 and tokenizers 0.22.1 beside it; torch
// 2.15.0, the CPU, eager attention, loaded by from_pretrained):
//
//	PYTHONPATH=tf4.57.1:deps python tools/oracle/hf_block_saved.py sim/testdata/hf/hunyuan_v1_moe-tiny.json {1,2} 2 32 {float32,bfloat16} eager nocache keepfp32
//
// HunYuanMoEV1Moe loops over an nn.ModuleList of experts, the routing
// weights cast to the hidden states' dtype before they weight each
// expert's output; the gate is the same fp32 wg. fp32 570,884 /
// 1,021,700, bf16 408,836 / 716,036; at 2 layers param_bytes and
// grad_bytes 611,840 (fp32) and 307,968 (bf16: the two 8 x 64 wg fp32).
func TestHunyuanMoETransformers4(t *testing.T) {
	checkSavedRelease(t, "hunyuan_v1_moe-tiny.json", "4.57.1", "fp32", 570_884, 1_021_700, 611_840, 611_840)
	checkSavedRelease(t, "hunyuan_v1_moe-tiny.json", "4.57.1", "bf16", 408_836, 716_036, 307_968, 307_968)
}

// hunyuan_v1_moe under 4.55.4 is refused (the 4.56.0 wheel is the first
// with models/hunyuan_v1_moe); moe_topk may be listed per layer
// (Hunyuan-A13B's) but one value for all; without head_dim it is refused
// as the dense model is; the names are transformers' (5.x: 3-D experts,
// the gate's wg; 4.x: one MLP an expert).
func TestHunyuanMoEConfig(t *testing.T) {
	tiny := string(readHF(t, "hunyuan_v1_moe-tiny.json"))
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.55.4"})
	if err == nil || !strings.Contains(err.Error(), `model_type "hunyuan_v1_moe" needs transformers 4.56 or later`) {
		t.Errorf("transformers 4.55.4: error %v, want one naming 4.56", err)
	}
	if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"head_dim": 16,`, "", 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), `"head_dim" must be given`) {
		t.Errorf("no head_dim: error %v", err)
	}
	for _, tc := range []struct{ topK, err string }{
		{`[2, 2]`, ""},
		{`[2, 2, 3]`, ""}, // longer than the layers: the first two read
		{`[2, 3]`, `"moe_topk" must be the same for every layer in memsh (got 2 at 0, 3 at 1)`},
		{`[2]`, `"moe_topk" must be an integer or list one for each of the 2 layers (got 1 entries)`},
		{`[2, 0]`, `"moe_topk" must list positive integers (got 0 at 1)`},
		{`9`, `"moe_topk" (9) must be at most "num_experts" (8)`},
	} {
		m, err := hf.FromConfig([]byte(strings.Replace(tiny, `"moe_topk": 2`, `"moe_topk": `+tc.topK, 1)), "sdpa")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("moe_topk %s: %v", tc.topK, err)
		case tc.err == "" && m.Params() != 152_960:
			t.Errorf("moe_topk %s: %d parameters, want 152,960", tc.topK, m.Params())
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("moe_topk %s: error %v, want %q", tc.topK, err, tc.err)
		}
	}
	for version, want := range map[string][]string{
		"5.25.0": {"model.layers.0.mlp.gate.wg.weight", "model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj",
			"model.layers.0.mlp.shared_mlp.gate_proj.weight", "model.layers.0.self_attn.query_layernorm.weight"},
		"4.57.1": {"model.layers.0.mlp.gate.wg.weight", "model.layers.1.mlp.experts.7.up_proj.weight", "model.layers.1.mlp.shared_mlp.down_proj.weight"},
	} {
		m, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: version})
		if err != nil {
			t.Fatal(err)
		}
		names := loweredParamNames(t, tinyPlan(t, m))
		for _, n := range want {
			if !names[n] {
				t.Errorf("transformers %s: no parameter %s", version, n)
			}
		}
	}
}
