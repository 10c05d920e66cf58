package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// quantExpertsPlan is TestQuantSkippedExperts' two MoE layers (4 experts of
// hidden 32 on dim 64, grouped_mm) under QLoRA on every nn.Linear, their
// 3-D experts quantized too when experts is set.
func quantExpertsPlan(t *testing.T, experts bool, ckpt string) *core.Plan {
	return quantExpertsPlanOf(t, nn.MoEGroupedMM, experts, ckpt)
}

// quantExpertsPlanOf is quantExpertsPlan with the experts of impl.
func quantExpertsPlanOf(t *testing.T, impl string, experts bool, ckpt string) *core.Plan {
	const d = 64
	moe := &nn.MoE{Name: "moe", Dim: d, Hidden: 32, Experts: 4, TopK: 2, Act: "swiglu", Impl: impl}
	if impl == nn.MoEDenseBMM {
		moe.Router, moe.TopK = nn.RouterTopKSigmoid, 1 // Llama 4's
	}
	block := &core.Sequential{Layers: []core.Layer{&nn.Linear{Name: "proj", In: d, Out: d}, moe}}
	m := &core.Model{Name: "m", Layers: []core.Layer{&nn.Embedding{Name: "embed", Rows: 100, Dim: d},
		&core.Repeat{Name: "layers", Layer: block, N: 2}, &nn.Linear{Name: "head", In: d, Out: 100}}, Vocab: 100}
	p := tinyPlan(t, m)
	p.Precision = mustPrecision(t, "bf16")
	p.Quant, p.QuantExperts = "nf4", experts
	p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
	p.Checkpoint = core.Checkpoint{Mode: ckpt}
	return p
}

// TestQuantExperts counts Axolotl's quantize_moe_experts by hand (sim/core/
// quant_experts.go): gate_up_proj [4, 64, 64] is 16,384 elements, down_proj
// [4, 64, 32] 8,192. Stored by quantize_4bit as nf4: codes (n+1)/2 bytes,
// an fp32 absmax per 64 elements and the 16-entry fp32 code table: 9,280
// and 4,672 bytes where bf16 held 32,768 and 16,384, so the two layers'
// parameters shrink by 2 x (23,488 + 11,712) = 70,400 bytes. Each forward
// dequantizes them whole in bf16 (32,768 and 16,384 bytes) before the
// grouped GEMMs; grouped_mm keeps them for its input's gradient, so they
// go in the backward of the GEMM that read them last (down_proj's, then
// gate's). Under full checkpointing the layer saves nothing: the
// parametrization cache drops them as the experts' forward ends, and the
// recompute dequantizes them again.
func TestQuantExperts(t *testing.T) {
	plain := evalPlan(t, quantExpertsPlan(t, false, "none"))
	if got, want := plain.States.Params-evalPlan(t, quantExpertsPlan(t, true, "none")).States.Params, int64(70_400); got != want {
		t.Errorf("parameters shrink by %d bytes, want %d", got, want)
	}
	r, err := Evaluate(quantExpertsPlan(t, true, "none"), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(r.Notes, "\n"), "replaces nn.Linear modules only") {
		t.Errorf("a note that quant= skipped the experts: %v", r.Notes)
	}
	const gu, dn = 32_768, 16_384
	checkOpEvents(t, r.Trace, []opEventCase{
		{"layers.0.moe.experts.dequantize_4bit.gate_up_proj", replay.PhaseForward, []int64{gu}},
		{"layers.0.moe.experts.dequantize_4bit.down_proj", replay.PhaseForward, []int64{dn}},
		{"layers.0.moe.experts.parametrization_cache", replay.PhaseForward, nil},
		{"layers.0.moe.experts.down_proj", replay.PhaseBackward, []int64{8_192, -16_384, -dn}},
		{"layers.0.moe.experts.gate_up_proj.gate", replay.PhaseBackward, []int64{-8_192, -gu, -16}},
	})
	// Llama 4's dense bmm (every expert on every token): [4, 64, 64] and
	// [4, 32, 64], the same sizes, read by torch.bmm.
	dense := quantExpertsPlanOf(t, nn.MoEDenseBMM, true, "none")
	if got, want := evalPlan(t, quantExpertsPlanOf(t, nn.MoEDenseBMM, false, "none")).States.Params-evalPlan(t, dense).States.Params, int64(70_400); got != want {
		t.Errorf("dense bmm: parameters shrink by %d bytes, want %d", got, want)
	}
	dr, err := Evaluate(dense, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	checkOpEvents(t, dr.Trace, []opEventCase{
		{"layers.0.moe.experts.dequantize_4bit.gate_up_proj", replay.PhaseForward, []int64{gu}},
		{"layers.0.moe.experts.dequantize_4bit.down_proj", replay.PhaseForward, []int64{dn}},
	})
	ck, err := Evaluate(quantExpertsPlan(t, true, "full"), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	checkOpEvents(t, ck.Trace, []opEventCase{
		{"layers.0.moe.experts.parametrization_cache", replay.PhaseForward, []int64{-gu, -dn}},
		{"layers.0.moe.experts.dequantize_4bit.gate_up_proj", replay.PhaseRecompute, []int64{gu}},
	})
}

// TestQuantExpertsUnderPEFT: LoRA's target parameters
// mlp.experts.gate_up_proj and mlp.experts.down_proj on qwen3_moe-tiny.json
// (grouped_mm; 4 experts of 32 on hidden 64, the config of
// TestLoRAMoESavedAsPEFT) wrap the experts in PEFT's ParamWrapper, whose
// parametrization runs after bitsandbytes' (Axolotl's
// patch_peft_target_parameters_matching): each weight is dequantized
// (32,768 and 16,384 bf16 bytes), torch.baddbmm merges the adapters into a
// new weight of the same size, and the dequantized one goes at once: the
// parametrization cache keeps the merged result, which grouped_mm saves as
// before. all-linear, whose conversion names the experts' parameters
// bare, wraps no quantized expert (the patched injection matches module
// paths only): no merge.
func TestQuantExpertsUnderPEFT(t *testing.T) {
	plan := func(experts bool, lora core.LoRA) *core.Plan {
		p := hfSavedPlan(t, "qwen3_moe-tiny.json", 2, "bf16", hf.Options{Attn: "sdpa", Experts: "grouped_mm"}, false)
		p.LoRA = &lora
		p.Quant, p.QuantExperts = "nf4", experts
		return p
	}
	params := core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"q_proj"}, TargetParameters: []string{"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}}
	if got, want := evalPlan(t, plan(false, params)).States.Params-evalPlan(t, plan(true, params)).States.Params, int64(70_400); got != want {
		t.Errorf("parameters shrink by %d bytes, want %d", got, want)
	}
	r, err := Evaluate(plan(true, params), core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	const at = "model.layers.0.mlp.experts."
	checkOpEvents(t, r.Trace, []opEventCase{
		{at + "dequantize_4bit.gate_up_proj", replay.PhaseForward, []int64{32_768}},
		{at + "gate_up_proj.lora.merged", replay.PhaseForward, []int64{32_768, -32_768}},
		{at + "down_proj.lora.merged", replay.PhaseForward, []int64{16_384, -16_384}},
		{at + "parametrization_cache", replay.PhaseForward, nil},
	})
	prog, err := plan(true, core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range prog.Ops {
		if op.Kind == "baddbmm" && strings.Contains(op.Name, ".experts.") {
			t.Errorf("all-linear under quant_experts merges %s: the bare converted names wrap no quantized expert", op.Name)
		}
	}
}

// TestQuantExpertsRefused: what quant_experts is not modelled with.
func TestQuantExpertsRefused(t *testing.T) {
	int8 := quantExpertsPlan(t, true, "none")
	int8.Quant = "int8"
	if err := int8.Validate(); err == nil || !strings.Contains(err.Error(), "4-bit nf4") {
		t.Errorf("int8 experts: %v, want refused", err)
	}
	fused := quantExpertsPlan(t, true, "none")
	fused.Model.Layers[1].(*core.Repeat).Layer.(*core.Sequential).Layers[1].(*nn.MoE).Impl = nn.MoEFusedLoop
	if _, err := Evaluate(fused, core.Options{}); err == nil || !strings.Contains(err.Error(), "grouped_mm experts") {
		t.Errorf("the fused loop's experts: %v, want refused", err)
	}
}
