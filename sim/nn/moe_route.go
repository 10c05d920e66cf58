package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// routing is what the router hands the experts: per token, the top-k
// expert indices and their weights.
type routing struct {
	weights core.Value // [T, k]: the dtype the experts' outputs are weighted in
	idx     core.Value // [T, k] int64
	tokens  int64      // T, this rank's tokens
	first   int32      // the router's first op
}

// route lowers the router (MoE's doc: Router).
func (m *MoE) route(b *core.Builder, x core.Value) routing {
	T := core.Rows(b.Shape(x))
	E, k := m.Experts, m.TopK
	r := routing{tokens: T, first: int32(len(b.P.Ops))}
	if m.ClassifierRouter {
		return m.routeZero(b, x, r)
	}
	if m.SparseMixer {
		return m.routeSparseMixer(b, x, r)
	}
	switch m.router() {
	case RouterTopKSigmoid:
		return m.routeTopKSigmoid(b, x, r)
	case RouterSigmoid:
		// DeepseekV3TopkRouter: F.linear(x.float(), weight.float()),
		// sigmoid, selection under no_grad on scores + correction bias
		// (grouped top-k over n_group groups), gather of the selected
		// scores, renormalised, times routed_scaling_factor: fp32 weights.
		// Lfm2MoeTopKRouter (SigmoidInDType): F.linear(x, weight) and the
		// sigmoid in the activations' dtype, so the weights are too.
		// MiniMaxM2TopKRouter (SigmoidLogitsFP32): F.linear in the
		// activations' dtype, the sigmoid over the logits cast to fp32.
		// AfmoeTokenChoiceRouter (LinearRouter, RouterName
		// "router.gate"): MiniMax-M2's through an nn.Linear module.
		dt := routerDType(b, units.FP32)
		if m.SigmoidInDType || m.SigmoidLogitsFP32 {
			dt = routerDType(b, b.Prec.Compute)
		}
		var logits core.Value
		if m.LinearRouter {
			logits = b.Linear(nameOr(m.RouterName, "gate"), core.RoleRouter, x, m.Dim, E, false)
		} else {
			logits = routerParamLinear(b, nameOr(m.RouterName, "gate"), x, m.Dim, E, false, m.KeepRouterFP32, dt)
		}
		if m.SigmoidLogitsFP32 {
			logits = b.Cast(logits, units.FP32, "router logits upcast for the sigmoid (router_logits.float())")
		}
		if m.SigmoidAfterGather {
			if m.ScoreBias {
				m.scoreBias(b)
			}
			r.idx = m.topkIndices(b, logits, T)
			g := b.AddOp("gather", "topk_logits", []core.Value{logits, r.idx})
			w := b.Out(g, "topk_logits", []int64{T, k}, b.Dtype(logits), "selected router logits")
			b.Save(g, r.idx, logits) // GatherBackward0 keeps self (derivatives.yaml: gather_backward(grad, self, dim, index))
			r.weights = m.normTopK(b, b.Unary("sigmoid", w, false, true))
			break
		}
		scores := b.Unary("sigmoid", logits, false, true)
		if m.ScoreBias {
			m.scoreBias(b)
		}
		r.idx = m.topkIndices(b, scores, T)
		g := b.AddOp("gather", "topk_weights", []core.Value{scores, r.idx})
		w := b.Out(g, "topk_weights", []int64{T, k}, b.Dtype(scores), "selected sigmoid scores")
		b.Save(g, r.idx)
		r.weights = m.normTopK(b, w)
		if m.WeightsHidden { // LagunaTopKRouter: routing_weights.to(hidden_states.dtype)
			r.weights = b.Cast(r.weights, b.Dtype(x), "top-k weights cast to the hidden states' dtype")
		}
	case RouterSqrtSoftplus:
		return m.routeSqrtSoftplus(b, x, r)
	case RouterTopKSoftmax:
		// GptOssTopKRouter: F.linear(x, weight, bias), top-k of the
		// logits, softmax over the k in the logits' dtype.
		// GraniteMoeTopKRouter: the same without a bias, over the logits
		// upcast to fp32, its weights cast back (TopKLogitsFP32).
		dt := routerDType(b, b.Prec.Compute)
		var logits core.Value
		if m.LinearRouter { // 4.x's GraniteMoeTopKGating: self.layer, an nn.Linear
			logits = b.Linear(nameOr(m.RouterName, "router"), core.RoleRouter, x, m.Dim, E, m.RouterBias)
		} else {
			logits = routerParamLinear(b, nameOr(m.RouterName, "router"), x, m.Dim, E, m.RouterBias, m.KeepRouterFP32, dt)
		}
		if m.TopKLogitsFP32 {
			dt = units.FP32
			logits = b.Cast(logits, dt, "router logits upcast to fp32")
		}
		tk := b.AddOp("topk", "topk", []core.Value{logits})
		top := b.Out(tk, "router_top_value", []int64{T, k}, dt, "top-k router logits")
		r.idx = b.Out(tk, "router_indices", []int64{T, k}, units.INT64, "top-k expert indices")
		b.Val(r.idx).Grad = false
		b.Save(tk, r.idx)
		if m.TopKSoftmaxFP32 { // Cohere2MoeTopKRouter: F.softmax(top-k logits, dtype=torch.float)
			dt = units.FP32
		}
		sm := b.AddOp("softmax", "softmax", []core.Value{top})
		r.weights = b.Out(sm, "routing_weights", []int64{T, k}, dt, "softmax over the top-k logits")
		b.Save(sm, r.weights)
		b.SaveSoftmaxInput(sm, top)
		if m.TopKLogitsFP32 || m.TopKSoftmaxFP32 {
			r.weights = b.Cast(r.weights, b.Dtype(x), "routing weights in the hidden states' dtype")
		}
	default:
		// MixtralSparseMoeBlock: router_logits = self.gate(x) (an
		// nn.Linear: quantized and adapted like any linear when the
		// experts are nn.Linear modules), softmax in fp32, top-k,
		// renormalised (Mixtral always; Qwen2-MoE when norm_topk_prob),
		// then cast to the hidden states' dtype.
		var logits core.Value
		probsDt := b.Dtype(x)
		if (m.impl() == MoELoop && !m.ParamRouter) || m.LinearRouter {
			name := m.RouterName
			if name == "" {
				name = "gate"
			}
			xr := x
			if m.RouterFP32 && m.KeepRouterFP32 {
				// transformers 4.x's Ernie4_5_MoeSparseMoeBlock: an fp32
				// nn.Linear gate over hidden_states.float()
				// (modeling_ernie4_5_moe.py at 4.57.1)
				xr = b.Cast(x, units.FP32, "router input in fp32 (hidden_states.float())")
			}
			logits = b.Linear(name, core.RoleRouter, xr, m.Dim, E, false)
			if m.KeepRouterFP32 {
				keepParamFP32(b, name+".weight")
			}
			if m.StaticsBias {
				// 4.x's Ernie4_5_MoeSparseMoeBlock keeps it beside the
				// gate (self.moe_statics; 5.x's router holds it).
				staticsBias(b, "moe_statics.e_score_correction_bias", E)
			}
		} else {
			dt := routerDType(b, b.Prec.Compute)
			if m.RouterFP32 {
				dt = routerDType(b, units.FP32)
			}
			name := m.RouterName
			if name == "" {
				name = "router"
			}
			logits = routerParamLinear(b, name, x, m.Dim, E, false, m.KeepRouterFP32, dt)
			if m.StaticsBias {
				staticsBias(b, name+".moe_statics.e_score_correction_bias", E)
			}
			if dt != b.Prec.Compute {
				probsDt = dt // softmax(..., dtype=fp32).type_as(logits)
			}
		}
		if m.WeightsFP32 {
			probsDt = units.FP32
		}
		if m.WeightsHidden {
			probsDt = b.Dtype(x)
		}

		probsIn := units.FP32
		if m.SoftmaxInDType {
			probsIn = b.Dtype(logits)
		}
		sm := b.AddOp("softmax", "router_softmax", []core.Value{logits})
		probs := b.Out(sm, "router_probs", []int64{T, E}, probsIn, "router probabilities")
		b.Save(sm, probs)
		b.SaveSoftmaxInput(sm, logits)
		b.Op(sm).Flops = 5 * float64(T*E)
		if m.GroupLimited {
			probs = m.maskGroups(b, probs, T)
		}
		tk := b.AddOp("topk", "topk", []core.Value{probs})
		w := b.Out(tk, "routing_weights", []int64{T, k}, probsIn, "top-k routing weights")
		r.idx = b.Out(tk, "expert_index", []int64{T, k}, units.INT64, "top-k expert indices")
		b.Val(r.idx).Grad = false
		b.Save(tk, r.idx)
		w = m.normTopK(b, w)
		r.weights = b.Cast(w, probsDt, "routing weights in the hidden states' dtype")
	}
	return r
}

// routerDType is the dtype the router's gating GEMM runs in: Megatron's
// --moe-router-dtype when set (parallel(router_dtype=), precision
// "megatron" only), else dflt. Megatron-Core's TopKRouter.gating
// (megatron/core/transformer/moe/router.py l.66-71 at core_v0.12.0,
// d580efc68; the same in core_v0.13.0) casts the input and the weight to
// it, F.linear(input.to(router_dtype), self.weight.to(router_dtype)):
// the linear keeps the cast input for the weight's gradient, an fp32
// [tokens, hidden] copy a layer. topk_softmax_with_capacity (moe_utils.py
// l.500-506) returns the probs .type_as(logits): in that dtype too.
func routerDType(b *core.Builder, dflt units.DType) units.DType {
	if d := b.Par.RouterDType; d != units.InvalidDType {
		return d
	}
	return dflt
}

// topkIndices is DeepSeek-V3's selection (get_topk_indices, under
// no_grad): group scores, a group mask and masked scores, all [T, E] or
// smaller transients, then the top-k indices.
func (m *MoE) topkIndices(b *core.Builder, scores core.Value, T int64) core.Value {
	i := b.AddOp("topk", "select_experts", []core.Value{scores})
	idx := b.Out(i, "topk_indices", []int64{T, m.TopK}, units.INT64, "selected experts")
	b.Val(idx).Grad = false
	b.Op(i).NoGradB = true
	// scores + correction bias, the group mask expanded to the scores,
	// the masked scores
	b.Op(i).WorkF = 3 * units.FP32.Bytes(T*m.Experts)
	return idx
}

// maskGroups zeroes the probabilities of the experts outside the best
// groups (GroupLimited): the group scores, their top-k and the group
// mask expanded to the experts are transients; masked_fill keeps the
// negated bool mask, one byte a token and expert, for its backward.
func (m *MoE) maskGroups(b *core.Builder, probs core.Value, T int64) core.Value {
	i := b.AddOp("masked_fill", "group_mask", []core.Value{probs})
	out := b.Out(i, "group_masked_probs", []int64{T, m.Experts}, units.FP32, "probabilities outside the chosen groups zeroed")
	mask := b.Out(i, "group_mask", []int64{T, m.Experts}, units.BOOL, "~score_mask.bool(), saved by masked_fill")
	b.Val(mask).Grad = false
	b.Save(i, mask)
	// score_mask expanded and reshaped to [T, E] in fp32, then .bool()
	b.Op(i).WorkF = units.FP32.Bytes(T*m.Experts) + units.BOOL.Bytes(T*m.Experts)
	return out
}

// normTopK renormalises the top-k weights to sum to one (w / w.sum(-1)).
func (m *MoE) normTopK(b *core.Builder, w core.Value) core.Value {
	if !m.NormTopK {
		return w
	}
	s := b.Shape(w)
	i := b.AddOp("sum", "topk_sum", []core.Value{w})
	sum := b.Out(i, "topk_sum", []int64{s[0], 1}, b.Dtype(w), "sum of the top-k weights")
	if m.NormMin {
		c := b.AddOp("clamp", "topk_sum_min", []core.Value{sum})
		clamped := b.Out(c, "topk_sum_clamped", []int64{s[0], 1}, b.Dtype(w), "sum clamped from below by norm_min")
		b.Save(c, sum)
		sum = clamped
	}
	d := b.AddOp("div", "topk_norm", []core.Value{w, sum})
	y := b.Out(d, "normalized_weights", s, b.Dtype(w), "top-k weights renormalised")
	b.Save(d, w, sum)
	return y
}

// routerParamLinear is a router whose weight is a parameter applied with
// F.linear, not an nn.Linear module (DeepSeek's gate, gpt-oss's router,
// Megatron's TopKRouter): quantization and LoRA leave it alone. x is cast
// to dt first (DeepSeek computes its router in fp32); the weight too,
// unless stored in dt already. keepFP32 stores the weight in fp32 under
// 16-bit parameters (MoE.KeepRouterFP32).
func routerParamLinear(b *core.Builder, name string, x core.Value, in, out int64, bias, keepFP32 bool, dt units.DType) core.Value {
	defer b.Scope(name)()
	return paramLinear(b, "weight", x, in, out, bias, keepFP32, dt)
}

// paramLinear is routerParamLinear's F.linear in the current module, over
// its parameter weight (LongCat-Flash's router applies its classifier's
// weight in its own forward: the op is the router's, the parameter
// router.classifier.weight).
func paramLinear(b *core.Builder, weight string, x core.Value, in, out int64, bias, keepFP32 bool, dt units.DType) core.Value {
	w := b.Param(weight, []int64{out, in}, core.RoleRouter)
	if keepFP32 {
		keepParamFP32(b, weight)
	}
	params := []int32{w}
	if bias {
		params = append(params, b.Param("bias", []int64{out}, core.RoleRouter))
	}
	xin := b.Cast(x, dt, "router input in the router's dtype")
	ins := []core.Value{xin}
	if merged := b.ParamLoRA(w, weight); merged != core.NoValue {
		// PEFT's ParamWrapper on the weight: F.linear reads W + delta,
		// which requires grad (core.Builder.ParamLoRA)
		params = params[1:]
		wv := b.Cast(merged, dt, "merged router weight in the router's dtype")
		i := b.AddOp("matmul", "", []core.Value{xin, wv}, params...)
		y := b.Out(i, "logits", []int64{core.Rows(b.Shape(xin)), out}, dt, "router logits")
		b.Save(i, xin)
		if b.Grad(xin) {
			b.Save(i, wv)
		}
		b.Op(i).Flops = 2 * float64(core.Rows(b.Shape(xin))) * float64(in) * float64(out)
		return y
	}
	if b.P.Params[w].Stored(b.Prec) != dt {
		wc := b.AddOp("cast", "weight_to_"+dt.Name(), nil, w)
		wv := b.Out(wc, "weight."+dt.Name(), []int64{out, in}, dt, "router weight in the router's dtype")
		b.Val(wv).Cat = core.CatParams
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", "", ins, params...)
	y := b.Out(i, "logits", []int64{core.Rows(b.Shape(xin)), out}, dt, "router logits")
	if b.Trainable(w) {
		b.Save(i, xin)
	}
	if b.Grad(xin) && len(ins) > 1 {
		b.Save(i, ins[1])
	}
	b.Op(i).Flops = 2 * float64(core.Rows(b.Shape(xin))) * float64(in) * float64(out)
	return y
}

// loads are the rows each expert of the replayed rank processes, for
// tokens routed per rank and ep ranks exchanging them in balanced shares:
// the replayed rank holds experts [0, experts/ep). (The busiest rank's
// load, parallel(expert_load=), sizes the received rows as a whole:
// lowerDispatched.)
func (m *MoE) loads(tokens, ep int64) ([]int64, error) {
	E, k := m.Experts, m.TopK
	local := E / ep
	rows := make([]int64, local)
	if m.Capacity > 0 {
		c := math.Ceil(m.Capacity * float64(tokens) * float64(k) / float64(E))
		if c*float64(E*ep) > float64(units.MaxElements) {
			return nil, fmt.Errorf("capacity=%g pads %.3g token copies to the experts, too many to count in bytes", m.Capacity, c*float64(E*ep))
		}
		for i := range rows {
			rows[i] = int64(c) * ep
		}
		return rows, nil
	}
	routed := tokens * k * ep // copies routed over the expert-parallel group
	for e := range rows {     // one share each, the remainder one more each
		rows[e] = routed / E
		if int64(e) < routed%E {
			rows[e]++
		}
	}
	return rows, nil
}

func sum64(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// staticsBias registers ERNIE 4.5 MoE's per-expert selection bias as
// transformers does: an nn.Parameter of (1, experts) created fp32 with
// requires_grad=False (Ernie4_5_MoeStatics, modeling_ernie4_5_moe.py at
// 5.25.0, kept fp32 by _keep_in_fp32_modules_strict): one of
// named_parameters(), so counted and sharded with the parameters, with no
// gradient and no optimizer state (the optimizer takes the parameters that
// require grad).
func staticsBias(b *core.Builder, name string, experts int64) {
	pi := b.Param(name, []int64{1, experts}, core.RoleRouter)
	b.P.Params[pi].Trainable = false
	keepParamFP32(b, name)
}

// scoreBias registers ScoreBias's per-expert selection bias: a buffer,
// set from the experts' loads between steps, with no gradient and no
// optimizer state (DeepseekV3TopkRouter's e_score_correction_bias); with
// ScoreBiasParam an nn.Parameter created with requires_grad=False
// (AfmoeSparseMoeBlock.expert_bias, modular_afmoe.py at 5.25.0), counted
// and sharded with the parameters, still with no gradient or optimizer
// state. KeepScoreBiasFP32 keeps either in fp32 in a 16-bit model.
func (m *MoE) scoreBias(b *core.Builder) {
	name := nameOr(m.ScoreBiasName, "gate.e_score_correction_bias")
	if m.ScoreBiasParam {
		pi := b.Param(name, []int64{m.Experts}, core.RoleRouter)
		b.P.Params[pi].Trainable = false
		if m.KeepScoreBiasFP32 {
			keepParamFP32(b, name)
		}
		return
	}
	dt := b.Prec.Params
	if m.KeepScoreBiasFP32 {
		dt = units.FP32
	}
	b.Buffer(name, []int64{m.Experts}, dt, "auxiliary-loss-free routing bias")
}

// keepParamFP32 stores the parameter name (under the current scope) in
// fp32 when the parameters are 16-bit (MoE.KeepRouterFP32).
func keepParamFP32(b *core.Builder, name string) {
	if b.Prec.Params.Bytes(1) >= units.FP32.Bytes(1) {
		return
	}
	full := b.Name(name)
	for i := len(b.P.Params) - 1; i >= 0; i-- {
		if b.P.Params[i].Name == full {
			b.P.Params[i].DType = units.FP32
			return
		}
	}
	panic(core.LowerError{Err: &units.Error{Path: full, Msg: "no parameter " + full + " to keep in fp32", Hint: "this is memsh's own mistake: please report it"}})
}
