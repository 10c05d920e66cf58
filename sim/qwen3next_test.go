package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// The Gated DeltaNet hybrids' parameter counts, each transformers 5.17.0's
// AutoModelForCausalLM.from_config(config) on the meta device,
// sum(p.numel()); with mtp=True plus the multi-token prediction layer
// the checkpoint holds (fc 2 x hidden^2, three norms and a
// gated-attention MoE decoder layer built as Qwen3NextDecoderLayer /
// Qwen3_5MoeDecoderLayer on the meta device: 1,650,471,424 and
// 844,640,768).
//
//   - qwen3-next-80b-a3b-instruct.json: the sizes of the hub's
//     Qwen/Qwen3-Next-80B-A3B-Instruct config.json (hidden 2048, 48
//     layers, every fourth full attention, 512 experts of 512 and one
//     shared, 10 a token, vocab 151,936), the defaults of
//     Qwen3NextConfig too: 79,674,391,296, the model card's and
//     transformers' model page's "80B total parameters, only 3B active".
//   - qwen3.5-35b-a3b.json: a Qwen3.5-35B-A3B text_config (hidden 2048, 40
//     layers, 256 experts of 512 and one shared, 8 a token, vocab 248,320,
//     as TensorRT-LLM's and public loaders' tests quote it) under
//     Qwen3_5MoeForCausalLM: 34,660,610,688; 35.1 B with the vision
//     tower transformers adds (Qwen3_5MoeForConditionalGeneration, the
//     name's 35B: TestQwen3VLParams).
//   - qwen3.5-4b.json: a Qwen3.5-4B-shaped text_config (hidden 2560, 32
//     layers, intermediate 9216, tied embeddings) under
//     Qwen3_5ForCausalLM: 4,205,751,296.
//   - qwen3-next-tiny.json: 4 layers of 64 (one dense, mlp_only_layers
//     [1]): 197,256.
func TestQwen3NextParams(t *testing.T) {
	for _, tc := range []struct {
		file, arch, version string
		mtp                 bool
		want                int64
	}{
		{"qwen3-next-80b-a3b-instruct.json", "", "", false, 79_674_391_296},
		{"qwen3-next-80b-a3b-instruct.json", "", "5.17.0", false, 79_674_391_296},
		{"qwen3-next-80b-a3b-instruct.json", "", "", true, 79_674_391_296 + 1_650_471_424},
		{"qwen3.5-35b-a3b.json", "Qwen3_5MoeForCausalLM", "5.17.0", false, 34_660_610_688},
		{"qwen3.5-35b-a3b.json", "Qwen3_5MoeForCausalLM", "5.2.0", true, 34_660_610_688 + 844_640_768},
		{"qwen3.5-4b.json", "Qwen3_5ForCausalLM", "5.17.0", false, 4_205_751_296},
		{"qwen3-next-tiny.json", "", "", false, 197_256},
		{"qwen3-next-tiny.json", "", "5.17.0", false, 197_256},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "flash", Arch: tc.arch, Transformers: tc.version, MTP: tc.mtp})
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s (transformers %q, mtp %t): %d parameters, want %d (%+d)", tc.file, tc.version, tc.mtp, got, tc.want, got-tc.want)
		}
	}
}

// Parameter names and shapes as transformers names them (the tiny
// config's named_parameters() under 5.17.0; under 4.57.1 the experts are
// nn.Linear modules, experts.N.gate_proj and so on).
func TestQwen3NextNames(t *testing.T) {
	want := map[string][]int64{
		"model.layers.0.linear_attn.in_proj_qkvz.weight": {192, 64},
		"model.layers.0.linear_attn.in_proj_ba.weight":   {8, 64},
		"model.layers.0.linear_attn.conv1d.weight":       {128, 1, 4},
		"model.layers.0.linear_attn.dt_bias":             {4},
		"model.layers.0.linear_attn.A_log":               {4},
		"model.layers.0.linear_attn.norm.weight":         {16},
		"model.layers.0.linear_attn.out_proj.weight":     {64, 64},
		"model.layers.0.mlp.gate.weight":                 {4, 64},
		"model.layers.0.mlp.experts.gate_up_proj":        {4, 64, 64},
		"model.layers.0.mlp.shared_expert_gate.weight":   {1, 64},
		"model.layers.1.mlp.gate_proj.weight":            {96, 64},
		"model.layers.3.self_attn.q_proj.weight":         {128, 64},
		"model.layers.3.self_attn.q_norm.weight":         {32},
		"model.layers.3.self_attn.k_proj.weight":         {32, 64},
	}
	m, err := hf.FromConfigOptions(readHF(t, "qwen3-next-tiny.json"), hf.Options{Attn: "flash", Transformers: "5.17.0"})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := tinyPlan(t, m).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, p := range prog.Params {
		if shape, ok := want[p.Name]; ok {
			seen++
			if !equalShape(p.Shape, shape) {
				t.Errorf("%s: shape %v, want %v", p.Name, p.Shape, shape)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d named parameters", seen, len(want))
	}
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// What the transformers release and linear_attn= choose: fla's fused
// gated norm until 5.15 (gdnFusedNormUntil), the torch norm after it and
// with the torch kernel; 3-D experts under grouped_mm from 5.0.
func TestQwen3NextKernels(t *testing.T) {
	for _, tc := range []struct {
		version, kernel string
		fused           bool
		impl            string
	}{
		{"4.57.1", "", true, ""},
		{"5.14.0", "fla", true, nn.MoEGroupedMM},
		{"5.15.0", "", false, nn.MoEGroupedMM},
		{"5.17.0", "torch", false, nn.MoEGroupedMM},
		{"4.57.1", "torch", false, ""},
	} {
		m, err := hf.FromConfigOptions(readHF(t, "qwen3-next-tiny.json"), hf.Options{Attn: "flash", Transformers: tc.version, LinearAttn: tc.kernel})
		if err != nil {
			t.Fatal(err)
		}
		var g *nn.GatedDeltaNet
		for _, l := range m.Layers {
			core.Walk(l, "", func(_ string, x core.Layer) {
				if v, ok := x.(*nn.GatedDeltaNet); ok {
					g = v
				}
			})
		}
		kernel := tc.kernel
		if kernel == "" {
			kernel = nn.GDNFla
		}
		if g == nil || g.FusedNorm != tc.fused || (g.Kernel != kernel && !(g.Kernel == "" && kernel == nn.GDNFla)) {
			t.Errorf("%s, linear_attn %q: %+v, want fused norm %t, kernel %s", tc.version, tc.kernel, g, tc.fused, kernel)
		}
		if moe := firstMoE(m); moe == nil || moe.Impl != tc.impl || moe.RouterName != "gate" && tc.impl != "" {
			t.Errorf("%s: MoE %+v, want impl %q", tc.version, moe, tc.impl)
		}
		evalPlan(t, tinyPlan(t, m))
	}
}

func TestQwen3NextRefusals(t *testing.T) {
	for _, tc := range []struct {
		file string
		opts hf.Options
		want string
		hint string
	}{
		{"qwen3-next-tiny.json", hf.Options{Transformers: "4.56.2"}, `model_type "qwen3_next" needs transformers 4.57 or later`, "4.57.0.dev0"},
		{"qwen3.5-4b.json", hf.Options{Transformers: "4.57.1"}, `model_type "qwen3_5" needs transformers 5.2 or later (got transformers="4.57.1")`, ""},
		{"qwen3-next-tiny.json", hf.Options{LinearAttn: "triton"}, `linear_attn must be "fla" or "torch"`, "flash-linear-attention"},
		{"qwen3-8b.json", hf.Options{LinearAttn: "torch"}, `model_type "qwen3" has no Gated DeltaNet layers`, "leave it out"},
	} {
		tc.opts.Attn = "flash"
		_, err := hf.FromConfigOptions(readHF(t, tc.file), tc.opts)
		var ue *units.Error
		if !errors.As(err, &ue) || !strings.Contains(ue.Msg, tc.want) || !strings.Contains(ue.Hint, tc.hint) {
			t.Errorf("%s %+v: %v (hint %q), want %q (hint with %q)", tc.file, tc.opts, err, hintOf(ue), tc.want, tc.hint)
		}
	}
	bad := shrinkConfig(t, "qwen3-next-tiny.json", map[string]any{"layer_types": []any{"linear_attention", "sliding_attention", "linear_attention", "full_attention"}})
	if _, err := hf.FromConfigOptions(bad, hf.Options{Attn: "flash"}); err == nil || !strings.Contains(err.Error(), "layer_types") {
		t.Errorf("an unknown layer type: %v", err)
	}
	bad = shrinkConfig(t, "qwen3-next-tiny.json", map[string]any{"linear_num_value_heads": 3})
	if _, err := hf.FromConfigOptions(bad, hf.Options{Attn: "flash"}); err == nil || !strings.Contains(err.Error(), "linear_num_value_heads") {
		t.Errorf("value heads not a multiple of key heads: %v", err)
	}
}
