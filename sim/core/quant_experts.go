package core

import "github.com/memsh/memsh/sim/units"

// Quantized 3-D expert weights (Plan.QuantExperts), as Axolotl's
// quantize_moe_experts stores and reads them (src/axolotl/monkeypatch/
// moe_quant.py at axolotl-ai-cloud/axolotl 067b021c8): while transformers
// loads the checkpoint, each 3-D parameter with "expert" in its name
// (gate_up_proj, down_proj of a grouped_mm experts module) is quantized
// by bitsandbytes' replace_parameter_4bit (bitsandbytes 0.50.2
// nn/parametrize.py): the parameter becomes the 4-bit codes of
// quantize_4bit (the nf4 storage of QuantStorage, over the whole 3-D
// tensor), and a parametrization, Bnb4bitParametrization, dequantizes it
// under torch.no_grad() whenever the module reads it (dequantize_4bit: the
// whole [experts, out, in] tensor in the dtype it was quantized from). A
// forward pre-hook on the experts module enables torch's parametrization
// cache and its forward hook clears it, so each weight is dequantized once
// a forward and held until the experts' forward ends. grouped_mm keeps the
// dequantized weight for its input's gradient (it is an input tensor, not
// a parameter), so every MoE layer's dequantized experts are saved for the
// backward (recomputed with the layer under checkpointing).
//
// LoRA on them: Axolotl patches PEFT's parameter injection for the
// parametrized experts (patch_peft_target_parameters_matching): a target
// parameter wraps them only when it names the module path
// ("mlp.experts.gate_up_proj", its lora_target_parameters) and never
// through a bare name, so module names PEFT converts to the experts
// (gate_proj, up_proj, down_proj, all-linear: bare gate_up_proj and
// down_proj) leave them unwrapped (core.Builder.ParamLoRAFrom). Its README
// for Qwen3-Next-80B-A3B's QLoRA (examples/qwen3-next) measures about 47
// GiB with its default targets, which name shared_expert's projections,
// and about 71 GiB with the experts' target parameters.

// QuantizesExperts reports whether the plan stores 3-D expert weights
// quantized (train(quant_experts=True)).
func (b *Builder) QuantizesExperts() bool { return b.Ft != nil && b.Ft.quantExperts }

// DequantizedExperts marks 3-D expert weight p as stored in the plan's
// 4-bit scheme and lowers the parametrization's dequantize_4bit of it: the
// whole tensor in the dtype it was quantized from, which the caller reads
// in place of the parameter and holds until the experts' forward ends
// (HoldDequantized).
func (b *Builder) DequantizedExperts(p int32) Value {
	pi := &b.P.Params[p]
	pi.Quant = b.Ft.quant
	from := b.Ft.quantFrom
	n := pi.Numel
	d := b.AddOp("dequantize", "dequantize_4bit."+lastSegment(pi.Name), nil, p)
	w := b.Out(d, lastSegment(pi.Name)+".dequantized", pi.Shape, from, "expert weights dequantized by Bnb4bitParametrization (dequantize_4bit under no_grad, cached for the experts' forward)")
	b.Val(w).Cat, b.Val(w).Grad = CatParams, false
	if pi.Quant == "nf4-dq" {
		b.Op(d).WorkF = units.FP32.Bytes(divUp(n, nf4Block)) // the absmax dequantized to fp32 first
	}
	b.Op(d).Bytes = float64(QuantBytes(pi.Quant, pi.Shape) + from.Bytes(n))
	return w
}

// HoldDequantized keeps the dequantized expert weights ws to this point:
// the parametrization cache, cleared by the experts module's forward hook.
func (b *Builder) HoldDequantized(ws ...Value) {
	b.KeepAlive("parametrization_cache", ws...)
}
