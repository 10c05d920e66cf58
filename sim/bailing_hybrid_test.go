package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// Ling-3.0-Flash's parameters: 124,414,191,072, which transformers
// 5.25.0 counts on the meta device (BailingHybridForCausalLM) for
// ling-3.0-flash.json: BailingHybridConfig's defaults, which its
// docstring names inclusionAI/Ling-3.0-Flash's, as a public loader's test
// pins Ling-3.0-flash-int4's config.json (42 layers of 2560, MLA at 5,
// 11, ..., 41, 32 heads, kv_lora_rank 512, KDA heads of 128, layers 0-1
// dense of 6144, then 512 experts of 768, 8 a token, 1 shared; 157,184
// untied embeddings; the checkpoint's MTP layer not built).
// bailing_hybrid-tiny.json: 241,032.
func TestBailingHybridParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"ling-3.0-flash.json":      124_414_191_072,
		"bailing_hybrid-tiny.json": 241_032,
	})
}

// bailingTiny is bailing_hybrid-tiny.json cut to layers with set's keys
// set (the SwiGLU limit lists cut with it, as hf_block_saved.py cuts them).
func bailingTiny(t *testing.T, layers int64, set map[string]any) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(readHF(t, "bailing_hybrid-tiny.json"), &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		cfg[k] = v
	}
	cfg["num_hidden_layers"] = layers
	for _, key := range []string{"expert_swiglu_limit_list", "share_expert_swiglu_limit_list"} {
		if l, ok := cfg[key].([]any); ok {
			cfg[key] = l[:layers]
		}
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// What Ling 3 keeps for backward, against transformers 5.25.0 on PyTorch
// 2.15.0 (the CPU, no autocast, loaded by from_pretrained, without fla
// and causal-conv1d): bailing_hybrid-tiny.json (64 wide; layer_group_size
// 3: KDA + dense MLP, KDA + MoE, MLA + MoE; 4 heads of 16; MLA with
// kv_lora_rank 32, 16 + 8 query/key dims, 24 value dims as
// kimi_linear-tiny.json has them; 8 experts of 32, 2 a token, n_group 2,
// topk_group 1, 1 shared), 2 samples of SEQ tokens:
//
//	python tools/oracle/hf_block_saved.py CONFIG {1,2,3} 2 SEQ {float32,bfloat16} sdpa nocache keepfp32 [ckpt held]
//
// and, at 3 layers, the file with kda_safe_gate false (the softplus
// gate), with expert_swiglu_limit_list [0, 7, 7] and
// share_expert_swiglu_limit_list [0, 0, 5], and with q_lora_rank 32. In
// bf16 the KDA layer's conv1d runs in fp32 (its weight kept fp32): the
// fp32 copy of q, k and v and the fp32 padded output are kept. Under full
// checkpointing the step holds position_ids and the rotary pair (2 x
// 1,024 fp32, 2 x 512 bf16). The figures are the harness's kept bytes.
func TestBailingHybridSavesAsTransformers(t *testing.T) {
	limits := map[string]any{"expert_swiglu_limit_list": []any{0, 7, 7}, "share_expert_swiglu_limit_list": []any{0, 0, 5}}
	for _, tc := range []struct {
		name, precision string
		set             map[string]any
		seq             int64
		ckpt            bool
		saved           [3]int64 // at 1, 2 and 3 layers; 0: not measured
	}{
		{"", "fp32", nil, 32, false, [3]int64{10_266_900, 20_458_052, 20_922_980}},
		{"", "bf16", nil, 32, false, [3]int64{10_143_572, 20_227_780, 20_501_732}},
		{"", "fp32", nil, 96, false, [3]int64{21_276_948, 0, 43_721_316}},
		{"", "bf16", nil, 96, false, [3]int64{20_906_836, 0, 42_457_316}},
		{"", "fp32", nil, 32, true, [3]int64{0, 0, 165_124 + 2_304}},
		{"", "bf16", nil, 32, true, [3]int64{0, 0, 124_164 + 1_280}},
		{"softplus gate", "fp32", map[string]any{"kda_safe_gate": false}, 32, false, [3]int64{0, 0, 20_923_012}},
		{"softplus gate", "bf16", map[string]any{"kda_safe_gate": false}, 32, false, [3]int64{0, 0, 20_501_764}},
		{"swiglu limits", "fp32", limits, 32, false, [3]int64{0, 0, 21_004_900}},
		{"swiglu limits", "bf16", limits, 32, false, [3]int64{0, 0, 20_542_692}},
		{"q_lora_rank", "fp32", map[string]any{"q_lora_rank": 32}, 32, false, [3]int64{0, 0, 20_947_812}},
		{"q_lora_rank", "bf16", map[string]any{"q_lora_rank": 32}, 32, false, [3]int64{0, 0, 20_518_372}},
	} {
		for i, want := range tc.saved {
			if want == 0 {
				continue
			}
			layers := int64(i + 1)
			p := hfOraclePlan(t, bailingTiny(t, layers, tc.set), hf.Options{Attn: "sdpa"}, tc.precision)
			p.Seq = tc.seq
			if tc.ckpt {
				p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			}
			r := evalPlan(t, p)
			if got := r.SavedActivations + r.SavedWeightCopies; got != want {
				t.Errorf("%s %s seq %d ckpt %v, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.name, tc.precision, tc.seq, tc.ckpt, layers, got, want, got-want)
			}
		}
	}
}

// bailing_hybrid before 5.25 is refused (sinceWhy); bad limit lists and
// linear_attn="fla" are refused; the default layer pattern puts full
// attention at the last layer of each group; the names are transformers'.
func TestBailingHybridConfig(t *testing.T) {
	tiny := string(readHF(t, "bailing_hybrid-tiny.json"))
	for _, tc := range []struct {
		opts hf.Options
		want string
	}{
		{hf.Options{Attn: "sdpa", Transformers: "5.24.0"}, `model_type "bailing_hybrid" needs transformers 5.25 or later`},
		{hf.Options{Attn: "sdpa", LinearAttn: "fla"}, `not fla's chunk_kda`},
	} {
		if _, err := hf.FromConfigOptions([]byte(tiny), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.opts, err, tc.want)
		}
	}
	for _, tc := range []struct{ add, want string }{
		{`"expert_swiglu_limit_list": [0, 7],`, `"expert_swiglu_limit_list" must list one SwiGLU limit per decoder layer (3`},
		{`"swiglu_limits_shared": [0, -1, 5],`, `"swiglu_limits_shared" must list non-negative numbers`},
	} {
		if _, err := hf.FromConfig([]byte(strings.Replace(tiny, `"eos_token_id": 2,`, `"eos_token_id": 2, `+tc.add, 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.add, err, tc.want)
		}
	}
	// A KDA layer: q, k, v, o, f_proj and g_proj 64 x 64, conv1d 192 x 4,
	// dt_bias 64, A_log 4, b_proj 64 x 4, o_norm 16. An MLA layer: q_proj
	// 64 x 96, kv_a_proj_with_mqa 64 x 40, kv_a_layernorm 32, kv_b_proj 32
	// x 160, o_proj 96 x 64, g_proj 64 x 4. The dense MLP 3 x 64 x 128;
	// the MoE 8 experts and a shared MLP of 3 x 64 x 32, the router 8 x 64.
	const kda = 6*64*64 + 192*4 + 64 + 4 + 64*4 + 16
	const mla, dense, moe = 64*96 + 64*40 + 32 + 32*160 + 96*64 + 64*4, 3 * 64 * 128, 9*3*64*32 + 8*64
	const norms, outer = 2 * 64, 2*256*64 + 64
	if got := 2*kda + mla + dense + 2*moe + 3*norms + outer; got != 241_032 {
		t.Fatalf("hand count %d, transformers 241,032", got)
	}
	// Without layer_group_size (6), 7 layers: full attention at layer 5.
	cfg := strings.NewReplacer(`"layer_group_size": 3,`, ``, `"num_hidden_layers": 3`, `"num_hidden_layers": 7`).Replace(tiny)
	m, err := hf.FromConfig([]byte(cfg), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(6*kda+mla+dense+6*moe+7*norms+outer); got != want {
		t.Errorf("default layer_group_size: %d parameters, want %d", got, want)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.self_attn.forget_gate.f_proj.weight", "model.layers.0.self_attn.g_proj.weight",
		"model.layers.1.self_attn.forget_gate.A_log", "model.layers.5.self_attn.g_proj.weight", "model.layers.5.self_attn.kv_b_proj.weight",
		"model.layers.6.mlp.experts.gate_up_proj", "model.layers.6.mlp.shared_experts.up_proj.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
}
