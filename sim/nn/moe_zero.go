package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// routeZero is LongCat-Flash's router (LongcatFlashTopkRouter,
// modular_longcat_flash.py at 5.25.0): its classifier, an nn.Linear over
// the Experts routed plus the ZeroExperts identity experts, whose weight
// the router applies in its own forward (F.linear(x.float(),
// classifier.weight.float()): the GEMM is the router's, not the
// classifier module's, as FlopCounterMode attributes it); softmax in fp32 (saves
// its output); the top-k of the scores plus e_score_correction_bias (a
// buffer) under no_grad; the selected scores gathered (saving the
// indices) and times routed_scaling_factor (a Python float: a new fp32
// [T, k] tensor, nothing saved). The weight is fp32 in an fp16 model
// alone (_keep_in_fp32_modules = ["classifier.weight"], which
// from_pretrained applies to fp16 loads only: modeling_utils.py l.3860 at
// 5.25.0), else weight.float() is a copy the GEMM keeps.
func (m *MoE) routeZero(b *core.Builder, x core.Value, r routing) routing {
	T, k := r.tokens, m.TopK
	E := m.Experts + m.ZeroExperts
	name := nameOr(m.RouterName, "router")
	done := b.Scope(name)
	logits := paramLinear(b, "classifier.weight", x, m.Dim, E, false, b.Prec.Params == units.FP16, routerDType(b, units.FP32))
	// PEFT's lora.Linear on the classifier (all-linear reaches it) is never
	// called: the router reads classifier.weight, the base layer's
	// (tools/oracle/peft_moe_saved.py: its adapters get no gradient).
	cd := b.Scope("classifier")
	b.IdleAdapter(core.RoleRouter, m.Dim, E)
	cd()
	done()
	sm := b.AddOp("softmax", "router_softmax", []core.Value{logits})
	probs := b.Out(sm, "scores", []int64{T, E}, units.FP32, "router probabilities over routed and zero experts (fp32)")
	b.Save(sm, probs)
	b.SaveSoftmaxInput(sm, logits)
	b.Op(sm).Flops = 5 * float64(T*E)
	b.Buffer(name+".e_score_correction_bias", []int64{E}, b.Prec.Params, "auxiliary-loss-free routing bias over routed and zero experts")
	i := b.AddOp("topk", "select_experts", []core.Value{probs})
	r.idx = b.Out(i, "topk_indices", []int64{T, k}, units.INT64, "selected experts, routed or zero")
	b.Val(r.idx).Grad = false
	b.Op(i).NoGradB = true
	b.Op(i).WorkF = units.FP32.Bytes(T * E) // scores + correction bias
	g := b.AddOp("gather", "topk_weights", []core.Value{probs, r.idx})
	w := b.Out(g, "topk_weights", []int64{T, k}, units.FP32, "selected softmax scores")
	b.Save(g, r.idx)
	r.weights = b.Ew("mul", "routed_scaling", []core.Value{w}, []int64{T, k}, units.FP32, "top-k weights times routed_scaling_factor")
	return r
}

// zeroExperts is LongcatFlashMoE.forward's identity experts before the
// routed ones run: the weight of the zero experts a token picked,
// topk_weights.masked_fill(~identity_mask, 0).sum(-1, keepdim=True)
// (masked_fill keeps the negated bool mask), times the token
// (hidden_states * identity_weights, promoted to the fp32 weights' dtype:
// it keeps both operands); the zero slots re-pointed at routed experts
// spread over the range (torch.where on indices, no gradient) with their
// weights zeroed (masked_fill(identity_mask, 0), keeping the mask). The
// routed experts then run every slot, zero ones included: tokens * top_k
// rows, as without zero experts. It returns the routing the experts get
// and the identity output, which Lower casts to the hidden states' dtype
// and adds to theirs.
func (m *MoE) zeroExperts(b *core.Builder, x core.Value, r routing) (routing, core.Value) {
	T, k := r.tokens, m.TopK
	ge := b.AddOp("ge", "identity_mask", []core.Value{r.idx})
	mask := b.Out(ge, "identity_mask", []int64{T, k}, units.BOOL, "slots that picked a zero expert")
	b.Val(mask).Grad = false
	b.Op(ge).NoGradB = true
	nt := b.AddOp("bitwise_not", "not_identity", []core.Value{mask})
	notMask := b.Out(nt, "not_identity_mask", []int64{T, k}, units.BOOL, "~identity_mask")
	b.Val(notMask).Grad = false
	b.Op(nt).NoGradB = true
	mf := b.AddOp("masked_fill", "identity_weights", []core.Value{r.weights, notMask})
	iw := b.Out(mf, "identity_weights", []int64{T, k}, units.FP32, "weights of the zero-expert slots")
	b.Save(mf, notMask)
	sum := b.Ew("sum", "identity_weight", []core.Value{iw}, []int64{T, 1}, units.FP32, "each token's zero-expert weight")
	identity := b.Mul("identity_output", x, sum)
	wh := b.AddOp("where", "dummy_indices", []core.Value{r.idx, mask})
	idx := b.Out(wh, "topk_indices", []int64{T, k}, units.INT64, "zero slots re-pointed at routed experts")
	b.Val(idx).Grad = false
	b.Op(wh).NoGradB = true
	b.Op(wh).WorkF = 2 * units.INT64.Bytes(T*k) // (topk_indices - n) * n // zero_expert_num
	zf := b.AddOp("masked_fill", "zero_slot_weights", []core.Value{r.weights, mask})
	w := b.Out(zf, "topk_weights", []int64{T, k}, units.FP32, "routing weights with the zero slots zeroed")
	b.Save(zf, mask)
	r.idx, r.weights = idx, w
	return r, identity
}
