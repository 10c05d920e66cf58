package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// The MoE routers transformers' from_pretrained keeps fp32 in a bf16
// model (nn.MoE.KeepRouterFP32, _keep_in_fp32_modules_strict's
// "gate.weight"): the parameter and gradient bytes of a two-layer tiny
// model, bf16, against the harness building it as from_pretrained loads
// it (transformers 5.25.0 and 5.23.0, the 5.23.0 wheel unpacked on
// PYTHONPATH; torch 2.15.0, the CPU):
//
//	[PYTHONPATH=tf5.23.0] python tools/oracle/hf_block_saved.py sim/testdata/hf/FILE.json 2 2 32 {bfloat16,float16} sdpa nocache keepfp32
//
// param_bytes / grad_bytes:
//
//   - deepseek-v2-tiny.json, 5.25.0: 217,792 / 217,792 (one MoE layer's
//     router, 8 x 64, fp32: 1,024 B more than bf16); 5.23.0, whose
//     DeepseekV2 lists nothing to keep: 216,768 / 216,768, 2 B each.
//
//   - ernie4_5_moe-tiny.json, 5.25.0 and 5.23.0 alike (every 5.x keeps
//     "gate.weight"): 207,520 / 207,488, two routers of 4 x 64 fp32 and
//     the statics' (1, 4) fp32 e_score_correction_bias, a parameter
//     without gradient (16 B a layer in the parameters, none in the
//     gradients).
//
//   - deepseek-v32-tiny.json (DeepSeek-V3.2, 64 wide, an indexer of 2
//     heads in both layers, layer 1 with 8 experts), 5.25.0: bf16 224,640
//     / 219,968, the router fp32; float16 225,152 / 219,968, the indexers'
//     weights_proj (2 x 64) fp32 besides, _keep_in_fp32_modules applying
//     to fp16 loads only (the indexer trains nothing: no gradients).
//
//   - hunyuan_v1_moe-tiny.json, 5.25.0: 307,968 / 307,968, two gates'
//     wg (8 x 64) fp32: an nn.Linear built with dtype=torch.float32, no
//     keep list (sim/hunyuan_test.go).
//
//   - dots1-tiny.json (3 layers, 1 and 2 MoE), 5.25.0: 439,360 / 439,360,
//     two routers (8 x 64) fp32 (sim/dots1_test.go).
//
//   - kimi_linear-tiny.json (3 layers, 1 and 2 MoE, 0 and 1 KDA), 5.25.0:
//     467,472 / 467,472, two routers (8 x 64) and two dt_bias (64) fp32
//     (nn.KimiDeltaAttention.DTBiasFP32); 5.23.0: 465,168 / 465,168
//     (sim/kimi_linear_test.go; layers 3 2 32 bfloat16).
//
//   - mistral4-tiny.json (3 layers, 1 and 2 MoE), 5.25.0: 336,752 /
//     336,752, half the fp32 load's 673,504: Mistral4PreTrainedModel's
//     _keep_in_fp32_modules_strict is empty, its router bf16
//     (sim/mistral4_test.go).
//
//   - solar_open-tiny.json (3 MoE layers), 5.25.0: 475,008 / 475,008,
//     three routers (8 x 64) fp32 (sim/solar_open_test.go).
//
//   - exaone_moe-tiny.json (3 layers, 1 and 2 MoE), 5.25.0: 362,560 /
//     362,560, two routers (8 x 64) fp32 (sim/exaone_moe_test.go).
//
// Without keepfp32 (cls(cfg).to(bfloat16), every parameter cast) the
// first two count 2 B a parameter: 216,768 and 206,480.
func TestMoERouterKeptFP32Bytes(t *testing.T) {
	for _, tc := range []struct {
		file, version, precision string
		params, grads            int64
	}{
		{"deepseek-v2-tiny.json", "5.25.0", "bf16", 217_792, 217_792},
		{"deepseek-v2-tiny.json", "5.23.0", "bf16", 216_768, 216_768},
		{"ernie4_5_moe-tiny.json", "5.25.0", "bf16", 207_520, 207_488},
		{"ernie4_5_moe-tiny.json", "5.23.0", "bf16", 207_520, 207_488},
		{"deepseek-v32-tiny.json", "5.25.0", "bf16", 224_640, 219_968},
		{"deepseek-v32-tiny.json", "5.25.0", "fp16", 225_152, 219_968},
		{"hunyuan_v1_moe-tiny.json", "5.25.0", "bf16", 307_968, 307_968},
		{"dots1-tiny.json", "5.25.0", "bf16", 439_360, 439_360},
		{"kimi_linear-tiny.json", "5.25.0", "bf16", 467_472, 467_472},
		{"kimi_linear-tiny.json", "5.23.0", "bf16", 465_168, 465_168},
		{"mistral4-tiny.json", "5.25.0", "bf16", 336_752, 336_752},
		{"solar_open-tiny.json", "5.25.0", "bf16", 475_008, 475_008},
		{"exaone_moe-tiny.json", "5.25.0", "bf16", 362_560, 362_560},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		cpu, err := core.LookupRuntime("cpu")
		if err != nil {
			t.Fatal(err)
		}
		p.Runtime, p.Batch, p.Seq = cpu, 2, 32
		if p.Precision, err = core.LookupPrecision(tc.precision); err != nil {
			t.Fatal(err)
		}
		r := evalPlan(t, p)
		if got, want := r.States.Params, tc.params; got != want {
			t.Errorf("%s %s %s: parameters %d B, want %d (%+d)", tc.file, tc.version, tc.precision, got, want, got-want)
		}
		if r.States.Grads != tc.grads {
			t.Errorf("%s %s %s: gradients %d B, want %d (%+d)", tc.file, tc.version, tc.precision, r.States.Grads, tc.grads, r.States.Grads-tc.grads)
		}
	}
}
