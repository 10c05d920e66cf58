package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// PEFT's target parameters reach nn.Linear modules too. On a model whose
// LoRA targets PEFT converts (lora_experts.go), the converted targets
// ("gate.weight", "gate_up_proj", "down_proj") are matched against every
// parameter of the model, the key module.param equal to a target or
// ending in "." and the target (BaseTuner._inject_parameters,
// peft/tuners/tuners_utils.py at 0.21.2), whatever module holds it. So
// an nn.Linear named gate gets PEFT's ParamWrapper on its weight:
// AFMoE's router, mlp.router.gate (AfmoeTokenChoiceRouter's nn.Linear,
// modeling_afmoe.py at transformers 5.25.0), whose leaf name all-linear
// leaves out of target_modules since it is one of qwen2_moe's 4.x names.

// paramTargeted reports whether the parameter param of the current module
// is one LoRA's target parameters reach (ParamLoRA would wrap it).
func (b *Builder) paramTargeted(param string) bool {
	targets, _, err := b.paramTargets()
	if err != nil {
		return false // ParamLoRA refuses it where it is lowered
	}
	key := b.Name(param)
	for t := range targets {
		if key == t || strings.HasSuffix(key, "."+t) {
			return true
		}
	}
	return false
}

// paramWrappedLinear lowers, in the linear's scope, nn.Linear with PEFT's
// ParamWrapper on its weight w (a 2-D parameter: _LoraParameterProxy, W +
// delta, computed once per forward; ParamLoRA): F.linear reads the
// merged weight, which requires grad, so it saves its input x and, when
// x requires grad, the weight it read (the merged weight, or under
// autocast the compute-dtype copy autocast makes of it: the merged
// weight is no leaf, so autocast caches no cast of it). It returns
// NoValue when w is not targeted, and refuses, as PEFT does
// (create_and_replace_param in BaseTuner._inject_parameters), a weight
// targeted as a parameter whose linear a module target adapts too.
func (b *Builder) paramWrappedLinear(w int32, role Role, params []int32, x Value, in, out int64) Value {
	if b.paramTargeted("weight") && b.adapts(role) {
		panic(LowerError{&units.Error{Path: b.Name("weight"), Msg: fmt.Sprintf("lora: a target parameter names the weight of %s, which a target module adapts too: PEFT refuses to wrap a parameter of a LoRA layer (\"Trying to wrap an `nn.Parameter` of layer '%s' of type Linear, which is not a valid target\")", b.Name(""), b.Name("")),
			Hint: "target the linear as a module or its weight as a parameter, not both"}})
	}
	merged := b.ParamLoRA(w, "weight")
	if merged == NoValue {
		return NoValue
	}
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	xin := b.Cast(x, dt, "autocast copy of linear input")
	wv := b.Cast(merged, dt, "autocast copy of the merged weight")
	i := b.AddOp("matmul", "", []Value{xin, wv}, params[1:]...)
	y := b.Out(i, "out", WithLast(b.Shape(xin), out), dt, b.Concat("output of linear ", b.Name("")))
	b.Save(i, xin)
	if b.Grad(xin) {
		b.Save(i, wv)
	}
	b.Op(i).Flops = 2 * float64(Rows(b.Shape(xin))) * float64(in) * float64(out)
	b.Op(i).Bytes += float64(b.Val(xin).Bytes) + float64(dt.Bytes(in*out))
	return y
}

// refuseQuantParamTarget refuses a quantized linear whose weight LoRA's
// target parameters reach: PEFT's ParamWrapper would read bitsandbytes'
// packed 4-bit storage as the weight (ParamWrapper._get_in_out_features
// takes the parameter's shape), which transformers 5.25.0 quantizes for
// every nn.Linear but the output layer (get_keys_to_not_convert).
func (b *Builder) refuseQuantParamTarget(name string) {
	done := b.Scope(name)
	targeted := b.paramTargeted("weight")
	path := b.Name("weight")
	done()
	if targeted {
		panic(LowerError{&units.Error{Path: path, Msg: "lora: PEFT wraps this quantized nn.Linear's weight as a target parameter (the MoE target conversion's " + lastSegment(strings.TrimSuffix(path, ".weight")) + ".weight), and its ParamWrapper cannot adapt a bitsandbytes-quantized weight",
			Hint: "name the modules to adapt instead of all-linear, without the router (\"gate\"), or train without quant"}})
	}
}

// refuseTPParamTarget refuses, in a tensor-parallel linear's scope, a
// weight LoRA's target parameters reach: PEFT's ParamWrapper on a
// sharded nn.Linear is not modelled.
func (b *Builder) refuseTPParamTarget() {
	if b.paramTargeted("weight") {
		panic(LowerError{&units.Error{Path: b.Name("weight"), Msg: "lora: a target parameter reaches this tensor-parallel linear's weight; memsh does not model PEFT's ParamWrapper on a sharded linear",
			Hint: "adapt the linear as a module (targets=), or train without tp"}})
	}
}

// AllLinearByLeaf reports whether LoRA's all-linear reaches modules by
// leaf name on this model: PEFT converts its targets
// (_convert_peft_config_moe resolves all-linear to the leaf names of
// every nn.Linear, _resolve_string_target_modules, peft 0.21.2), and a
// leaf-name target matches any module whose path ends in it, a
// convolution's too (RoleConvLeaf).
func (b *Builder) AllLinearByLeaf() bool {
	return b.Lora != nil && slices.Contains(b.Lora.Targets, "all-linear") && !b.peftExperts().none()
}
