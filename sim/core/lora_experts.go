package core

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// PEFT's LoRA on transformers 5's MoE families (docs/peft.md, "MoE").
// transformers 5 stores the experts as 3-D parameters (gate_up_proj
// [E, 2h, d], down_proj [E, d, h]) and their router as a parameter
// (gate.weight [E, d]), no longer 4.x's nn.Linear modules. For the model
// types it converts 4.x checkpoints of (conversion_mapping.py's
// _MODEL_TO_CONVERSION_PATTERN: Mixtral-style and Qwen2-MoE-style), PEFT
// from 0.20 rewrites LoRA's targets before it applies them
// (_convert_peft_config_moe, peft/utils/transformers_weight_conversion.py
// at 0.21.2): a module-name target naming one of the 4.x modules (Mixtral's
// gate, w1, w3, w2; Qwen2-MoE's gate, gate_proj, up_proj, down_proj: the
// name or a dotted path ending in it) leaves target_modules and becomes a
// target parameter (gate.weight, gate_up_proj, down_proj), gate and up at
// twice the rank and alpha (rank_pattern, alpha_pattern) since they are
// fused; "all-linear" becomes the leaf names of every nn.Linear but the
// output layer plus all four 4.x names. So every nn.Linear named like a
// 4.x expert projection (a dense layer's or a shared expert's gate_proj,
// up_proj, down_proj) loses its adapter, and the experts and the router
// get PEFT's ParamWrapper. Naming one of gate and up without the other is
// PEFT's ValueError ("Cannot convert PEFT target(s) ... because they are
// fused into gate_up_proj").

// peftExpertNames are the 4.x module names of a conversion table: the
// router and the experts' projections; zero for a model PEFT converts
// nothing of.
type peftExpertNames struct{ router, gate, up, down string }

// peftExpertTables is _MOE_TARGET_MODULE_MAPPING (transformers_weight_conversion.py
// at 0.21.2) by the table Model.PEFTExperts names.
var peftExpertTables = map[string]peftExpertNames{
	"mixtral":   {"gate", "w1", "w3", "w2"},
	"qwen2_moe": {"gate", "gate_proj", "up_proj", "down_proj"},
}

func (n peftExpertNames) none() bool { return n.router == "" }

// converted is the parameter target a module-name target t becomes, ""
// when it stays a module target.
func (n peftExpertNames) converted(t string) string {
	if n.none() {
		return ""
	}
	for _, c := range [...]struct{ old, param string }{{n.router, "gate.weight"}, {n.gate, "gate_up_proj"}, {n.up, "gate_up_proj"}, {n.down, "down_proj"}} {
		if t == c.old || strings.HasSuffix(t, "."+c.old) {
			return c.param
		}
	}
	return ""
}

// excludes reports whether all-linear leaves the nn.Linear at module out:
// its leaf name is one of the table's.
func (n peftExpertNames) excludes(module string) bool {
	if n.none() {
		return false
	}
	switch lastSegment(module) {
	case n.router, n.gate, n.up, n.down:
		return true
	}
	return false
}

func (b *Builder) peftExperts() peftExpertNames {
	if b.Ft == nil {
		return peftExpertNames{}
	}
	return b.Ft.peftExperts
}

// paramTargets are the parameters LoRA wraps: its target_parameters and
// those its targets convert to, and whether gate_up_proj takes twice the
// rank (the conversion's rank_pattern, which reaches every key ending in
// gate_up_proj); or PEFT's refusal of gate without up (or up without
// gate).
func (b *Builder) paramTargets() (map[string]bool, bool, error) {
	if b.Lora == nil {
		return nil, false, nil
	}
	out := map[string]bool{}
	for _, t := range b.Lora.TargetParameters {
		out[t] = true
	}
	n := b.peftExperts()
	if n.none() {
		return out, false, nil
	}
	var gate, up bool
	for _, t := range b.Lora.Targets {
		if t == "all-linear" {
			out["gate.weight"], out["gate_up_proj"], out["down_proj"] = true, true, true
			gate, up = true, true
			continue
		}
		if isLoRARole(t) {
			continue
		}
		if p := n.converted(t); p != "" {
			out[p] = true
			gate = gate || t == n.gate || strings.HasSuffix(t, "."+n.gate)
			up = up || t == n.up || strings.HasSuffix(t, "."+n.up)
		}
	}
	if gate != up {
		have, miss := n.gate, n.up
		if up {
			have, miss = n.up, n.gate
		}
		return nil, false, fmt.Errorf("lora: target %q without %q: PEFT converts both into the experts' gate_up_proj and refuses one alone (\"Cannot convert PEFT target(s) %s without also targeting %s because they are fused into gate_up_proj\")", have, miss, have, miss)
	}
	return out, gate, nil
}

// ParamLoRA is PEFT's lora.ParamWrapper on the parameter w of the current
// module (a 3-D expert weight [E, out, in], a router's [out, in] weight)
// when LoRA's targets convert to it (paramTargets): lora_A [E x r, in],
// lora_B [out, E x r] (ParamWrapper.update_layer: nn.Linear(in, r *
// num_experts) and nn.Linear(r * num_experts, out); the experts' in and
// out swapped from the parameter's [E, in, out] reading since it is not
// is_transposed), r doubled for the fused gate_up_proj. It returns the
// weight the module's forward reads instead (NoValue when w is not
// targeted): ParamWrapper.forward registers a parametrization on w for
// the call, computed once (parametrize.cached()):
//
//   - 3-D, one adapter: _LoraFactorsProxy, torch.baddbmm(W, lhs, rhs,
//     alpha=scaling) with lhs = B as [E, out, r] and rhs = A as [E, r, in],
//     both cast to W's dtype first (get_delta_factors: .to(param.dtype), a
//     copy each when the adapters are fp32, which baddbmm saves): a new
//     [E, out, in] tensor in W's dtype that requires grad, so each expert
//     GEMM saves it and its input, and its backward computes the whole
//     weight gradient before baddbmm's two bmm reduce it to the adapters'.
//   - 2-D (num_experts 1): _LoraParameterProxy, W + get_delta_weight
//     (lora.Linear's (B @ A) * scaling in the adapters' dtype, cast to
//     W's): the matmul of two parameters saves no activation.
//
// PEFT's ParamWrapper refuses lora_dropout != 0 (dropout cannot be
// factored out of the merged weight); so does this.
func (b *Builder) ParamLoRA(w int32, param string) Value { return b.ParamLoRAFrom(w, param, NoValue) }

// ParamLoRAFrom is ParamLoRA over base, the weight's value as the module
// reads it (bitsandbytes' parametrization dequantizes a 4-bit expert
// weight before PEFT's, quant_experts.go), NoValue for the parameter
// itself. The merge reads base and frees nothing of it.
func (b *Builder) ParamLoRAFrom(w int32, param string, base Value) Value {
	targets, fused, err := b.paramTargets()
	if err != nil {
		panic(LowerError{&units.Error{Path: b.Name(""), Msg: err.Error(), Hint: "target both (all-linear does), or neither"}})
	}
	key := b.Name(param)
	hit := false
	for t := range targets {
		if base != NoValue && !strings.Contains(t, ".") {
			continue // a quantized expert weight: Axolotl's patched injection matches module paths only (quant_experts.go)
		}
		if key == t || strings.HasSuffix(key, "."+t) {
			if b.loraHits == nil {
				b.loraHits = map[string]bool{}
			}
			b.loraHits[paramHit(t)], hit = true, true
		}
	}
	if !hit {
		return NoValue
	}
	if b.Lora.Dropout > 0 {
		panic(LowerError{&units.Error{Path: key, Msg: fmt.Sprintf("lora: dropout %g on a parameter PEFT wraps (lora.ParamWrapper does not work with lora_dropout != 0)", b.Lora.Dropout),
			Hint: "set dropout = 0, or target no MoE experts or router (PEFT converts their 4.x names and all-linear to target parameters on this model)"}})
	}
	p := b.P.Params[w]
	experts, out, in := int64(1), p.Shape[0], p.Shape[1]
	if len(p.Shape) == 3 {
		experts, out, in = p.Shape[0], p.Shape[1], p.Shape[2]
	}
	r := b.Lora.Rank
	if fused && (key == "gate_up_proj" || strings.HasSuffix(key, ".gate_up_proj")) {
		r *= 2 // rank_pattern .*\.gate_up_proj: r * 2 for the two fused targets
	}
	defer b.Scope(param)()
	defer b.Scope("lora")()
	done := b.Scope("lora_A")
	a := b.AdapterParam("weight", []int64{experts * r, in}, RoleLoRA)
	done()
	done = b.Scope("lora_B")
	bw := b.AdapterParam("weight", []int64{out, experts * r}, RoleLoRA)
	done()
	dt := p.Stored(b.Prec)
	if base != NoValue {
		dt = b.Dtype(base)
		if experts == 1 {
			panic(LowerError{units.Errorf(key, "internal error: a dequantized base for a 2-D parameter")})
		}
	}
	if experts == 1 {
		// (B @ A) * scaling in the adapters' dtype, then .to(W's dtype), W + delta
		adt := b.P.Params[a].Stored(b.Prec)
		i := b.AddOp("matmul", "delta_weight", nil, bw, a)
		delta := b.Out(i, "delta_weight", []int64{out, in}, adt, "LoRA's delta weight (B @ A) of "+p.Name)
		b.Op(i).Flops = 2 * float64(out*in*r)
		s := b.AddOp("mul", "scale", []Value{delta})
		delta = b.Out(s, "delta_scaled", []int64{out, in}, adt, "delta weight * scaling")
		delta = b.Cast(delta, dt, "delta weight in the parameter's dtype")
		j := b.AddOp("add", "merged", []Value{delta}, w)
		return b.Out(j, "merged", p.Shape, dt, "W + delta: the weight the forward reads (PEFT's parametrization of "+p.Name+")")
	}
	factor := func(pi int32, shape []int64, why string) (Value, []int32) {
		if b.P.Params[pi].Stored(b.Prec) == dt {
			return NoValue, []int32{pi}
		}
		c := b.AddOp("cast", "to_"+dt.Name(), nil, pi)
		v := b.Out(c, lastSegment(b.P.Params[pi].Name)+"."+dt.Name(), shape, dt, why)
		b.Op(c).Bytes += float64(b.P.Params[pi].Stored(b.Prec).Bytes(Numel(shape)))
		return v, nil
	}
	lhs, lp := factor(bw, []int64{experts, out, r}, "lora_B as [E, out, r] in the parameter's dtype (get_delta_factors)")
	rhs, rp := factor(a, []int64{experts, r, in}, "lora_A as [E, r, in] in the parameter's dtype (get_delta_factors)")
	var factors []Value
	for _, v := range []Value{lhs, rhs} {
		if v != NoValue {
			factors = append(factors, v)
		}
	}
	ins, params := factors, append(append([]int32{w}, lp...), rp...)
	if base != NoValue { // the dequantized weight in place of the parameter
		ins, params = append([]Value{base}, factors...), append(lp, rp...)
	}
	i := b.AddOp("baddbmm", "merged", ins, params...)
	merged := b.Out(i, "merged", p.Shape, dt, "W + scaling * lora_B @ lora_A per expert (torch.baddbmm): the weight the experts read")
	b.Val(merged).Grad = true
	b.Save(i, factors...)
	b.Op(i).Flops = 2 * float64(experts*out*in*r)
	b.Op(i).Bytes += 2 * float64(dt.Bytes(experts*out*in)) // W read, the merged weight written
	return merged
}

// paramHit is the loraHits key of a parameter target.
func paramHit(t string) string { return "parameter " + t }
