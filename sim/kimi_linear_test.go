package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// Kimi-Linear-48B-A3B's parameters: 49,122,675,072 (the safetensors
// index's "48B", 49.1 B), which transformers 5.25.0 counts on the meta
// device for kimi-linear-48b-a3b-instruct.json (the published
// config.json's sizes, as the nvfp4 repack Firworks/Kimi-Linear-48B-A3B-Instruct-nvfp4
// and Megatron-Bridge's kimi_linear_bridge test fixture copy them: 27
// layers of 2304, KDA layers 1-3, 5-7, ... and MLA layers 4, 8, ...,
// 24, 27; 32 KDA heads of 128; MLA with 32 heads, kv_lora_rank 512, no
// q_lora_rank, 128 + 64 query/key dims and 128 value dims; layer 0
// dense of 9216, then 256 experts of 1024, 8 a token, 1 shared;
// 163,840 untied embeddings; Kimi-Linear-48B-A3B-Base's config.json has
// the same sizes). kimi_linear-tiny.json: 232,584. Each:
//
//	with torch.device("meta"): AutoModelForCausalLM.from_config(AutoConfig.for_model(**json.load(f)))
func TestKimiLinearParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"kimi-linear-48b-a3b-instruct.json": 49_122_675_072,
		"kimi_linear-tiny.json":             232_584,
	})
}

// kimiLinearTiny is kimi_linear-tiny.json cut to layers, its
// linear_attn_config lists cut with it (hf_block_saved.py sets
// num_hidden_layers on the built config, whose layer_types
// KimiLinearConfig made from the file's three layers).
func kimiLinearTiny(t *testing.T, layers int64) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(readHF(t, "kimi_linear-tiny.json"), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["num_hidden_layers"] = layers
	la := cfg["linear_attn_config"].(map[string]any)
	for _, key := range []string{"kda_layers", "full_attn_layers"} {
		var kept []any
		for _, v := range la[key].([]any) {
			if int64(v.(float64)) <= layers {
				kept = append(kept, v)
			}
		}
		la[key] = kept
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// What Kimi Linear keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast, loaded by from_pretrained, fla
// and causal-conv1d not installed: chunk_kimi_delta_attention's and
// causal_conv1d_fn's torch paths): kimi_linear-tiny.json (64 wide; layers
// KDA + dense MLP, KDA + MoE, MLA + MoE; 4 KDA heads of 16; MLA with 4
// heads, kv_lora_rank 32, 16 + 8 query/key dims and 24 value dims, so that
// the CPU's SDPA takes its flash kernel, as CUDA's fused kernels do, not
// the math path unequal value dims send it to; 8 experts of 32, 2 a
// token, 1 shared), 2 samples of SEQ tokens at 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/kimi_linear-tiny.json {1,2,3} 2 SEQ {float32,bfloat16} sdpa nocache keepfp32 [ckpt held]
//
// SEQ 32 (one chunk, padded to 64), 64 (one whole chunk), 96 (two), 160
// (three). The KDA layer's torch kernel keeps about 9.7 MB at 2 x 32
// tokens, 4 heads of 16: its [chunk, chunk, head_dim] products a chunk
// and head (nn/kimi_delta_kernel.go). Under full checkpointing (ckpt
// held) the step keeps each layer's input and holds position_ids (256
// B), which every layer is handed (no rotary pair: KimiLinearModel has
// none). The figures are the harness's kept bytes (DeepSeek-V3's router
// saves 2,560 B more a MoE layer on its selection's branch, which dies
// with the forward). Under 5.23.0 (its wheel unpacked on PYTHONPATH),
// whose from_pretrained keeps nothing fp32, each router's F.linear
// saves its weight's fp32 copy: 20,424,964 at 3 layers, bf16. memsh
// counts such copies (and, in bf16, o_norm's weight.float(), 64 B a KDA
// layer) as saved weight copies, the harness as saved tensors: the rows
// compare their sum.
func TestKimiLinearSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, version string
		seq                int64
		ckpt               bool
		saved              [3]int64 // at 1, 2 and 3 layers; 0: not measured
	}{
		{"fp32", "", 32, false, [3]int64{10_295_588, 20_515_428, 20_928_132}},
		{"bf16", "", 32, false, [3]int64{10_116_708, 20_174_052, 20_420_868}},
		{"fp32", "", 64, false, [3]int64{0, 0, 22_513_796}},
		{"fp32", "", 96, false, [3]int64{21_362_980, 42_498_660, 43_736_708}},
		{"bf16", "", 96, false, [3]int64{20_830_820, 41_483_492, 42_223_876}},
		{"fp32", "", 160, false, [3]int64{32_397_604, 0, 0}},
		{"bf16", "", 160, false, [3]int64{0, 0, 63_961_348}},
		{"fp32", "", 32, true, [3]int64{132_356 + 256, 148_740 + 256, 165_124 + 256}},
		{"bf16", "", 32, true, [3]int64{107_780 + 256, 115_972 + 256, 124_164 + 256}},
		{"bf16", "5.23.0", 32, false, [3]int64{0, 0, 20_424_964}},
	} {
		for i, want := range tc.saved {
			if want == 0 {
				continue
			}
			layers := int64(i + 1)
			p := hfOraclePlan(t, kimiLinearTiny(t, layers), hf.Options{Attn: "sdpa", Transformers: tc.version}, tc.precision)
			p.Seq = tc.seq
			if tc.ckpt {
				p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			}
			r := evalPlan(t, p)
			if got := r.SavedActivations + r.SavedWeightCopies; got != want {
				t.Errorf("%s %s seq %d ckpt %v, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.version, tc.seq, tc.ckpt, layers, got, want, got-want)
			}
		}
	}
}

// kimi_linear under 5.16 is refused (models/kimi_linear came with 5.17);
// linear_attn="fla" and eager attention are refused; the layer lists are
// 1-based and must cover every layer; without them (and without
// layer_types) full attention at every fourth layer from the fifth;
// mlp_layer_types places the MoE layers; the names are transformers'.
func TestKimiLinearConfig(t *testing.T) {
	tiny := string(readHF(t, "kimi_linear-tiny.json"))
	for _, tc := range []struct {
		opts hf.Options
		want string
	}{
		{hf.Options{Attn: "sdpa", Transformers: "5.16.0"}, `model_type "kimi_linear" needs transformers 5.17 or later`},
		{hf.Options{Attn: "sdpa", LinearAttn: "fla"}, `not fla's chunk_kda`},
		{hf.Options{Attn: "eager"}, "eager"},
	} {
		if _, err := hf.FromConfigOptions([]byte(tiny), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one containing %q", tc.opts, err, tc.want)
		}
	}
	if _, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", LinearAttn: "torch"}); err != nil {
		t.Errorf(`linear_attn="torch": %v`, err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"kda_layers": [1, 2]`, `"kda_layers": [1]`, "leave layer 2 out"},
		{`"kda_layers": [1, 2]`, `"kda_layers": [0, 1, 2]`, "must list layer numbers (1-based, as Kimi Linear's checkpoints number them) in 1..3"},
		{`"kda_layers": [1, 2]`, `"kda_layers": [1, 2, 4]`, "must list layer numbers (1-based, as Kimi Linear's checkpoints number them) in 1..3"},
		{`"num_expert_group": 1`, `"num_expert_group": 3`, "must divide num_experts (8)"},
		{`"first_k_dense_replace": 1,`, `"first_k_dense_replace": 1, "mlp_layer_types": ["dense", "moe", "sparse"],`, `layer 1 is the string "moe"`},
	} {
		if _, err := hf.FromConfig([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.to, err, tc.want)
		}
	}
	// A KDA layer: q, k, v and o_proj 64 x 64, conv1d 192 x 4, f_a_proj and
	// g_a_proj 64 x 16, f_b_proj and g_b_proj 16 x 64, dt_bias 64, A_log 4,
	// b_proj 64 x 4, o_norm 16. An MLA layer: q_proj 64 x 96,
	// kv_a_proj_with_mqa 64 x 40, kv_a_layernorm 32, kv_b_proj 32 x 160,
	// o_proj 96 x 64. The dense MLP 3 x 64 x 128; the MoE 8 experts and a
	// shared MLP of 3 x 64 x 32, the router 8 x 64. Two norms a layer.
	const kda = 4*64*64 + 192*4 + 4*64*16 + 64 + 4 + 64*4 + 16
	const mla, dense, moe = 64*96 + 64*40 + 32 + 32*160 + 96*64, 3 * 64 * 128, 9*3*64*32 + 8*64
	const norms, outer = 2 * 64, 2*256*64 + 64
	if got := 2*kda + mla + dense + 2*moe + 3*norms + outer; got != 232_584 {
		t.Fatalf("hand count %d, transformers 232,584", got)
	}
	// Without the lists, 5 layers: KDA, KDA, KDA, KDA, MLA (i % 4 == 0
	// from i = 1); mlp_layer_types: the MoE at layer 2 alone.
	cfg := strings.NewReplacer(`"full_attn_layers": [3],`, ``, `"kda_layers": [1, 2],`, ``, `"num_hidden_layers": 3`, `"num_hidden_layers": 5`,
		`"first_k_dense_replace": 1,`, `"mlp_layer_types": ["dense", "dense", "sparse", "dense", "dense"],`).Replace(tiny)
	m, err := hf.FromConfig([]byte(cfg), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.Params(), int64(4*kda+mla+4*dense+moe+5*norms+outer); got != want {
		t.Errorf("default layer types, mlp_layer_types: %d parameters, want %d", got, want)
	}
	names := loweredParamNames(t, tinyPlan(t, m))
	for _, want := range []string{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.conv1d.weight",
		"model.layers.1.self_attn.forget_gate.f_a_proj.weight", "model.layers.1.self_attn.forget_gate.dt_bias",
		"model.layers.1.self_attn.forget_gate.A_log", "model.layers.2.self_attn.b_proj.weight", "model.layers.3.self_attn.g_b_proj.weight",
		"model.layers.3.self_attn.o_norm.weight", "model.layers.4.self_attn.kv_b_proj.weight", "model.layers.4.mlp.gate_proj.weight",
		"model.layers.2.mlp.experts.gate_up_proj", "model.layers.2.mlp.shared_experts.down_proj.weight", "model.layers.2.mlp.gate.weight"} {
		if !names[want] {
			t.Errorf("no parameter %s", want)
		}
	}
}
