package nn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MoE is a mixture-of-experts feed-forward block: a router picks top_k of
// the routed experts for each token, each expert is a gated (or plain)
// MLP, the outputs are weighted by the routing weights and summed back per
// token; shared experts run on every token beside them.
//
// Impl is how the experts are stored and run, which decides what
// quantization and LoRA reach and what autograd saves:
//
//   - "loop": one nn.Linear per expert projection and a Python loop over
//     the experts (transformers 4.x MixtralSparseMoeBlock,
//     Qwen2MoeSparseMoeBlock, DeepseekV3MoE; Megatron's SequentialMLP):
//     index-select the expert's tokens, run its MLP, multiply by the
//     routing weight, index_add_ into the output. bitsandbytes replaces
//     each expert Linear (replace_with_bnb_linear converts every nn.Linear
//     but lm_head) and PEFT's target_modules match each by name.
//   - "fused_loop": the same loop over experts stored as 3-D parameters
//     [experts, out, in] (gpt-oss's GptOssExperts, transformers 5):
//     bitsandbytes and PEFT's target_modules do not reach them
//     (bitsandbytes issue #1849), they stay in the params dtype.
//   - "grouped": the routed rows permuted into one buffer by expert and
//     one grouped GEMM per projection over 3-D weights (Megatron's
//     GroupedMLP/TEGroupedMLP, torchtitan, transformers 5 grouped_mm);
//     like fused_loop, quantization and adapters do not reach them.
//   - "grouped_mm": transformers 5's grouped_mm experts (its default
//     experts_implementation from 5.0; moe_hf.go): the routed copies
//     sorted by expert, one torch grouped_mm per projection over the 3-D
//     weights, each GEMM's output copied once more with the sentinel rows
//     zeroed, weighted, put back in token order and summed per token.
//
// Router is how the routing weights are made:
//
//   - "softmax": router logits from an nn.Linear (bitsandbytes quantizes
//     it with the rest), softmax in fp32 over all experts, then top-k
//     (Mixtral, Qwen-MoE), renormalised when NormTopK;
//   - "topk_softmax": a router parameter with a bias, top-k of the logits
//     then a softmax over the k (gpt-oss's GptOssTopKRouter);
//   - "sigmoid": DeepSeek-V3's router: a parameter applied in fp32,
//     sigmoid scores, selection on scores plus a per-expert correction
//     bias (auxiliary-loss-free balancing: a bias updated outside the
//     gradient, no optimizer state), weights renormalised when NormTopK.
//     Routers that are parameters, not nn.Linear modules, stay in their
//     stored precision under quant= and get no adapters.
//
// Routing balance: every expert gets an equal share of the routed copies
// (tokens*top_k/experts). With expert parallelism the layout's expert_load
// (core/expert.go) says how many balanced shares the busiest rank
// receives; the replayed rank is that one, so its memory and time follow
// its rows (one load knob, on the layout: without ep every expert runs on
// the replayed GPU and the step does the same work however the tokens
// split). Capacity > 0 is a capacity factor: every expert
// gets exactly ceil(capacity*tokens*top_k/experts) rows per source rank
// (tokens beyond it dropped, experts below it padded: GShard, Megatron's
// --moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity);
// 0 is dropless.
type MoE struct {
	Name          string
	Dim           int64
	Hidden        int64
	Experts       int64
	TopK          int64
	Act           string
	SharedExperts int64
	SharedHidden  int64 // per shared expert; 0 = Hidden
	// SharedGate: Qwen2-MoE's shared_expert with its sigmoid
	// shared_expert_gate (Linear(dim, 1)); otherwise DeepSeek's
	// shared_experts, added without a gate.
	SharedGate bool
	Capacity   float64 // capacity factor; 0 = dropless
	Impl       string  // "loop" (default), "fused_loop", "grouped", "grouped_mm", "dense_bmm" or "sequential"
	Router     string  // "softmax" (default), "topk_softmax" or "sigmoid"
	NormTopK   bool    // renormalise the top-k weights to sum to 1
	RouterBias bool    // the router has a bias (gpt-oss)
	ScoreBias  bool    // a per-expert selection bias, a buffer (DeepSeek-V3's e_score_correction_bias)
	ExpertBias bool    // the expert projections have biases (gpt-oss)
	// ClampedGLU is gpt-oss's gate (GptOssExperts._apply_gate): gate and
	// up clamped, glu = gate * sigmoid(gate * alpha), (up + 1) * glu; it
	// keeps three more [rows, hidden] tensors than SwiGLU. Every experts
	// implementation lowers it: the grouped_mm experts (lowerGroupedMM),
	// the loops and the grouped GEMM (gatedAct; transformers 4.57.1's and
	// 5.25.0's GptOssExperts loop and MiniMax M3's, measured under
	// experts="eager"); MiniMax M3's shared experts too (lowerShared: one
	// gate_up_proj, mlp_clamped.go).
	ClampedGLU bool
	// PostNorm names an RMSNorm (Llama's) over the block's output, routed
	// plus shared experts, inside the block's module: A.X-K1's
	// mlp.post_mlp_layernorm (AXK1MoE.forward, models/axk1/modeling_axk1.py
	// at 5.25.0); "" none.
	PostNorm string
	// RouterName is the softmax router's module name: under impl "loop"
	// (or with LinearRouter) the nn.Linear's, "gate" (Mixtral, Qwen-MoE)
	// when empty, "router" in Jamba; otherwise the parameter router's,
	// "router" when empty (transformers 5's TopKRouter modules are "gate").
	RouterName string
	// LinearRouter: the softmax router stays an nn.Linear module whatever
	// impl runs the experts (transformers 5's JambaSparseMoeBlock.router
	// until 5.20 and PhimoeTopKRouter, an nn.Linear subclass): quantization, LoRA and
	// freeze= reach it as they reach the 4.x loop's router.
	LinearRouter bool
	// SparseMixer: the router is PhiMoE's sparsemixer (moe_sparsemixer.go)
	// over the nn.Linear's logits, in place of the softmax router; it
	// always picks two experts a token.
	SparseMixer bool
	// ParamRouter: the softmax router is a parameter module even over the
	// 4.x loop's nn.Linear experts (transformers 4.57.1's
	// DeepseekV2MoEGate: F.linear of the fp32 input and weight.float()),
	// which PEFT's target_modules and bitsandbytes do not reach.
	ParamRouter bool
	// WeightsFP32: the softmax router's top-k weights stay fp32 instead of
	// being cast to the hidden states' dtype (transformers 5's
	// MixtralTopKRouter returns them uncast, so each expert output is
	// weighted in fp32); and the loop accumulates in the hidden states'
	// dtype, each fp32-weighted output cast to it (transformers 5's
	// experts start from zeros_like(hidden_states); DeepSeek-V3's sigmoid
	// weights are fp32 either way, and 4.x's DeepseekV3MoE.moe summed
	// them in fp32).
	WeightsFP32 bool
	// RouterFP32: the softmax router's gating GEMM runs in fp32 over the
	// input cast to fp32 (DeepseekV2TopkRouter: F.linear(x.float(),
	// weight.float()), modeling_deepseek_v2.py at 5.25.0), not in the
	// compute dtype; its softmax is fp32 either way.
	RouterFP32 bool
	// KeepRouterFP32: the router's weight stays fp32 in a bf16 or fp16
	// model, as transformers' from_pretrained loads it: the families'
	// _keep_in_fp32_modules_strict lists "gate.weight" (DeepSeek-V2/V3,
	// GLM-4.5, ERNIE 4.5 MoE ... at 5.25.0; modeling_utils.py
	// _get_dtype_plan l.3863-3865 applies it to bf16 and fp16 loads), so
	// the weight, its gradient and its optimizer state are fp32 and the
	// fp32 gating GEMM reads the weight itself, no weight.float() copy.
	KeepRouterFP32 bool
	// KeepScoreBiasFP32: ScoreBias's buffer stays fp32 likewise
	// (_keep_in_fp32_modules_strict's "e_score_correction_bias").
	KeepScoreBiasFP32 bool
	// ScoreBiasParam: ScoreBias's bias is an nn.Parameter without
	// gradient (requires_grad=False), not a buffer: counted with the
	// parameters, no gradient, no optimizer state (AFMoE's expert_bias;
	// scoreBias in moe_route.go).
	ScoreBiasParam bool
	// ScoreBiasName is ScoreBias's buffer; "" = gate.e_score_correction_bias
	// (LFM2-MoE's is the block's expert_bias).
	ScoreBiasName string
	// SigmoidInDType: the sigmoid router's gating GEMM and sigmoid run in
	// the activations' dtype, not fp32, and so do its top-k weights
	// (Lfm2MoeTopKRouter: F.linear(hidden_states, weight).sigmoid(),
	// modeling_lfm2_moe.py at 5.25.0).
	SigmoidInDType bool
	// SigmoidLogitsFP32: the sigmoid router's gating GEMM runs in the
	// activations' dtype and its logits are cast to fp32 for the sigmoid,
	// so the scores and top-k weights are fp32
	// (MiniMaxM2TopKRouter: F.linear(hidden_states.to(weight.dtype),
	// weight), sigmoid(router_logits.float()), modeling_minimax_m2.py at
	// 5.25.0).
	SigmoidLogitsFP32 bool
	// SigmoidAfterGather: the sigmoid router picks the top-k of its fp32
	// logits plus the correction bias and takes the sigmoid of the k
	// gathered logits only (Kolibri1TopKRouter:
	// topk(router_logits + e_score_correction_bias), then
	// router_logits.gather(1, indices).sigmoid(),
	// models/kolibri1/modeling_kolibri1.py at 5.25.0): the sigmoid keeps
	// [tokens, k], not DeepSeek-V3's [tokens, experts].
	SigmoidAfterGather bool
	// SharedUpDown names an ungated shared expert's projections up_proj
	// and down_proj (Nemotron-H's NemotronHMLP), not fc1 and fc2.
	SharedUpDown bool
	// SharedBias: the shared experts' projections are biased (ERNIE 4.5
	// MoE's use_bias: Ernie4_5_MoeMLP).
	SharedBias bool
	// NormMin: the renormalisation divides by the sum clamped from below
	// (Ernie4_5_MoeTopKRouter: routing_weights / clamp(sum, min=norm_min),
	// modeling_ernie4_5_moe.py at 5.25.0), whose clamp keeps the sum, one
	// more [tokens, 1] tensor than NormTopK alone.
	NormMin bool
	// SoftmaxInDType: the softmax router's gating GEMM and softmax run in
	// the activations' dtype, so the probabilities and the top-k weights
	// are in it too (Mistral4TopkRouter: F.linear(x, weight), then
	// router_logits.softmax(-1); modular_mistral4.py, 5.25.0). Without it
	// the probabilities are fp32 (softmax(..., dtype=torch.float)).
	SoftmaxInDType bool
	// WeightsHidden: the softmax router's top-k weights are cast to the
	// hidden states' dtype even when RouterFP32 computes them in fp32
	// (Ernie4_5_MoeTopKRouter's routing_weights.to(hidden_states.dtype);
	// DeepseekV2TopkRouter keeps them fp32); the sigmoid router's too
	// (LagunaTopKRouter, modeling_laguna.py at 5.25.0).
	WeightsHidden bool
	// StaticsBias: ERNIE 4.5's per-expert selection bias
	// (mlp.gate.moe_statics.e_score_correction_bias), a (1, experts) fp32
	// parameter without gradient (requires_grad=False) added to the
	// probabilities for the top-k only: counted with the parameters, no
	// gradient, no optimizer state.
	StaticsBias bool
	// TopKLogitsFP32: the top-k softmax router upcasts its logits to fp32
	// before the top-k (GraniteMoeTopKRouter: F.linear(x, weight).float(),
	// the softmax over the k in fp32, then .type_as(hidden_states);
	// modeling_granitemoe.py at 5.25.0), so the softmax keeps fp32 weights.
	TopKLogitsFP32 bool
	// GroupLimited: the softmax router's probabilities are masked to the
	// best groups before the top-k (DeepseekV2TopkRouter's topk_method
	// "group_limited_greedy": scores.masked_fill(~score_mask.bool(), 0.0)
	// outside no_grad, which saves the [tokens, experts] bool mask).
	GroupLimited bool
	// SentinelsEP: expert parallelism's sentinel rows handled as
	// transformers 5.18 and later handle them (integrations/moe.py and the
	// families' Experts.forward at 5.18.0): grouped_mm makes the sentinel
	// mask and zeroes those rows only when the experts are sharded
	// (5.0-5.17 did on every rank; under ep memsh lowers the experts as
	// dispatched grouped GEMMs whatever impl says), and the eager loop's one_hot has a
	// class for them (num_experts + 1, int64 [experts + 1, top_k, tokens]).
	SentinelsEP bool
	// WNames names the expert projections w1 (gate), w3 (up) and w2
	// (down), as Mixtral does; gate_proj, up_proj, down_proj otherwise.
	WNames bool
	// SwiGLULimit clamps the SwiGLU's pre-activations, gate from above and
	// up on both sides (DeepSeek-V4's swiglu_limit: DeepseekV4Experts.
	// _apply_gate and DeepseekV4MLP, modeling_deepseek_v4.py at 5.25.0);
	// the clamps keep their inputs, two more [rows, hidden] tensors than
	// SwiGLU. The loop, grouped, dispatched and grouped_mm experts and the
	// shared experts lower it (gatedAct); 0: none.
	SwiGLULimit float64
	// LimitAfterAct: the clamps come after the activation, silu(gate)
	// clamped from above and up on both sides (Ling 3's
	// BailingHybridExperts._apply_gate and BailingHybridMLP, Step3p7's
	// order; the same five [rows, hidden] tensors kept), SwiGLULimit the
	// routed experts' limit and SharedSwiGLULimit the shared experts'
	// (its expert_swiglu_limit_list and share_expert_swiglu_limit_list,
	// each 0 for none). Without it SwiGLULimit clamps both.
	LimitAfterAct     bool
	SharedSwiGLULimit float64
	// HashVocab: the experts are picked by a frozen token-id table, not a
	// top-k (DeepseekV4HashRouter: tid2eid[input_ids], an int64 [vocab,
	// top_k] buffer); the router's scores still weight them. 0: learned.
	HashVocab int64
	// SharedName is the shared experts' module name: "" is DeepSeek's
	// shared_experts, Qwen2-MoE's shared_expert with SharedGate, and
	// Llama 4's ungated shared_expert with RouterTopKSigmoid.
	SharedName string
	// ZeroExperts is LongCat-Flash's zero-computation (identity) experts
	// (zero_expert_num): the router scores Experts + ZeroExperts, a token's
	// zero slots add it times their weights, and the routed experts still
	// run those slots with zero weights (moe_zero.go). 0: none.
	ZeroExperts int64
	// ClassifierRouter is LongCat-Flash's router (routeZero): the
	// router.classifier weight applied in fp32 over Experts + ZeroExperts,
	// softmax, the correction bias for the top-k, routed_scaling_factor.
	ClassifierRouter bool
	// TopKSoftmaxFP32: the top-k softmax router (RouterTopKSoftmax) takes
	// the top-k of its logits in their dtype and softmaxes the k in fp32,
	// the weights cast back to the hidden states' dtype
	// (Cohere2MoeTopKRouter: torch.topk(router_logits), F.softmax(...,
	// dtype=torch.float), .to(hidden_states.dtype); modular_cohere2_moe.py
	// at 5.25.0): it keeps the same fp32 [tokens, k] softmax as
	// TopKLogitsFP32 without the fp32 copy of the logits.
	TopKSoftmaxFP32 bool
	// SharedAverage: the routed and shared experts' outputs are averaged,
	// (routed + shared) / 2, not summed (Cohere2MoeSparseMoeBlock's
	// shared_expert_combination_strategy "average"): a division by a
	// Python scalar, one more [tokens, dim] tensor, nothing saved.
	SharedAverage bool
	// SharedSumFP32: the routed and shared experts' outputs are summed in
	// fp32 and the sum cast back to the block input's dtype
	// (HYV3MoE.forward's enable_moe_fp32_combine, modeling_hy_v3.py at
	// 5.25.0: (routed_output.float() + shared_experts(x).float()).to(
	// x.dtype)): in a bf16 model three fp32 [tokens, dim] copies for a
	// moment (the routed output's made before the shared experts run),
	// nothing saved; in an fp32 one no copy at all.
	SharedSumFP32 bool
	// SharedFirst: the shared experts run before the router, their output
	// held while the routed experts run (LagunaSparseMoeBlock.forward,
	// modeling_laguna.py at 5.25.0); otherwise after them.
	SharedFirst bool
	// RoutedScale: the routed experts' output times a Python float before
	// the shared output is added (LagunaSparseMoeBlock's
	// routed_scaling_factor, applied whatever its value): one more
	// [tokens, dim] tensor, nothing saved.
	RoutedScale bool
	// GLUParams stores the experts as DBRX's DbrxExpertGLU does: three
	// 2-D parameters mlp.w1 (gate), mlp.v1 (up) and mlp.w2 (down), each
	// [experts x hidden, dim], expert e's rows a view, gate and up two
	// GEMMs (moe_dbrx.go). The fused_loop impl runs them.
	GLUParams bool
	// Jitter multiplies the block's input in place by uniform noise in
	// training before the router reads it (DbrxRouter's moe_jitter_eps;
	// moe_dbrx.go): the noise is saved, one more [tokens, dim] tensor;
	// with SparseMixer twice (PhiMoE's input_jitter_noise: the block's
	// and its router's multiply).
	Jitter bool
}

// MoE implementations and routers.
const (
	MoELoop      = "loop"
	MoEFusedLoop = "fused_loop"
	MoEGrouped   = "grouped"
	MoEGroupedMM = "grouped_mm"
	// MoESequential is Megatron-Core's SequentialMLP (no
	// --moe-grouped-gemm: megatron/core/transformer/moe/experts.py at
	// d98e8a64dd, SequentialMLP.forward): the permuted rows split by
	// expert (torch.split, views), a Transformer Engine MLP per local
	// expert weighting its rows by their probs as TEGroupedMLP does, the
	// outputs concatenated. It keeps the grouped experts' tensors and is
	// lowered as them (impl), without TE's grouped GEMM, whose per-stream
	// cuBLAS workspaces it never allocates (core/te_grouped.go
	// teGroupedSeen). Outside precision "megatron" it is "grouped".
	MoESequential = "sequential"

	RouterSoftmax     = "softmax"
	RouterTopKSoftmax = "topk_softmax"
	RouterSigmoid     = "sigmoid"
	// RouterSqrtSoftplus is DeepSeek-V4's DeepseekV4TopKRouter (and its
	// hash router's scoring): F.linear in the compute dtype,
	// sqrt(softplus(logits)), top-k of scores plus the correction bias,
	// the selected scores renormalised and scaled.
	RouterSqrtSoftplus = "sqrtsoftplus"
)

// MoEImpls and MoERouters list the accepted values, for error messages.
func MoEImpls() []string {
	return []string{MoELoop, MoEFusedLoop, MoEGrouped, MoEGroupedMM, MoEDenseBMM, MoESequential}
}
func MoERouters() []string {
	return []string{RouterSoftmax, RouterTopKSoftmax, RouterSigmoid, RouterTopKSigmoid, RouterSqrtSoftplus}
}

func (m *MoE) impl() string {
	switch m.Impl {
	case "":
		return MoELoop
	case MoESequential: // lowered as the grouped experts (MoESequential)
		return MoEGrouped
	}
	return m.Impl
}

func (m *MoE) router() string {
	if m.Router == "" {
		return RouterSoftmax
	}
	return m.Router
}

// expertMLP is one routed expert.
func (m *MoE) expertMLP() *MLP {
	return &MLP{Dim: m.Dim, Hidden: m.Hidden, Act: m.Act, Bias: m.ExpertBias}
}

func (m *MoE) sharedHidden() int64 {
	if m.SharedHidden == 0 {
		return m.Hidden
	}
	return m.SharedHidden
}

// shared is the shared experts as one MLP (DeepSeek's shared_experts is
// one DeepseekV3MLP of moe_intermediate_size * n_shared_experts).
func (m *MoE) shared() *MLP {
	return &MLP{Dim: m.Dim, Hidden: m.sharedHidden() * m.SharedExperts, Act: m.Act, Bias: m.SharedBias}
}

func (m *MoE) Kind() string           { return "moe" }
func (m *MoE) Label() string          { return m.Name }
func (m *MoE) Children() []core.Layer { return nil }

// UpdatesExpertBias reports whether the router's per-expert selection bias
// is updated from the experts' loads between steps (ScoreBias; Megatron's
// --moe-router-enable-expert-bias, whose all-reduce has a communicator of
// its own: replay/nccl_megatron.go).
func (m *MoE) UpdatesExpertBias() bool { return m.ScoreBias }

// Params counts the router (weight, bias), the routed experts and the
// shared experts with their gate; DeepSeek's correction bias is a buffer.
func (m *MoE) Params() int64 {
	n := m.Dim*(m.Experts+m.ZeroExperts) + m.Experts*m.expertMLP().Params()
	if m.PostNorm != "" {
		n += m.Dim
	}
	if m.RouterBias || m.StaticsBias || m.ScoreBias && m.ScoreBiasParam {
		n += m.Experts
	}
	if m.SharedExperts > 0 {
		n += m.shared().Params()
		if m.SharedGate {
			n += m.Dim
		}
	}
	return n
}

func (m *MoE) Summary() string {
	s := fmt.Sprintf("%d experts (top-%d), %d -> %d, %s", m.Experts, m.TopK, m.Dim, m.Hidden, m.Act)
	if m.SharedExperts > 0 {
		s += fmt.Sprintf(", %d shared", m.SharedExperts)
	}
	if m.ZeroExperts > 0 {
		s += fmt.Sprintf(", %d zero experts", m.ZeroExperts)
	}
	if m.Impl != "" && m.Impl != MoELoop {
		s += ", " + m.Impl
	}
	return s
}

func (m *MoE) Validate(path string) error {
	if err := m.expertMLP().Validate(path); err != nil {
		return err
	}
	if err := checkPositive(path, sized{FieldExperts, m.Experts}, sized{FieldTopK, m.TopK}); err != nil {
		return err
	}
	if m.TopK > m.Experts+m.ZeroExperts {
		if m.ZeroExperts > 0 {
			return fieldErr(path, FieldTopK, fmt.Sprintf(" (%d) must be at most ", m.TopK), FieldExperts, fmt.Sprintf(" plus the zero experts (%d + %d)", m.Experts, m.ZeroExperts))
		}
		return fieldErr(path, FieldTopK, fmt.Sprintf(" (%d) must be at most ", m.TopK), FieldExperts, fmt.Sprintf(" (%d)", m.Experts)).
			withHint(FieldTopK, " is how many of the ", FieldExperts, " each token is routed to")
	}
	if m.SharedExperts < 0 {
		return units.Errorf(path, "shared_experts must not be negative (got %d)", m.SharedExperts)
	}
	if m.SharedHidden < 0 {
		return units.Errorf(path, "shared_hidden must be positive (got %d)", m.SharedHidden)
	}
	if m.Capacity != 0 && !(m.Capacity >= 1) { // NaN fails too
		return units.Errorf(path, "capacity must be at least 1.0 (got %g)", m.Capacity)
	}
	if !oneOf(m.impl(), MoEImpls()) {
		return units.Errorf(path, "unknown moe impl %q (known: %s)", m.Impl, strings.Join(MoEImpls(), ", "))
	}
	if !oneOf(m.router(), MoERouters()) {
		return units.Errorf(path, "unknown moe router %q (known: %s)", m.Router, strings.Join(MoERouters(), ", "))
	}
	if m.ScoreBiasParam && !(m.ScoreBias && m.router() == RouterSigmoid) {
		return &units.Error{Path: path, Msg: "a score bias kept as a parameter is the sigmoid router's selection bias (AFMoE's expert_bias)",
			Hint: "set router=\"sigmoid\" and score_bias=True with it"}
	}
	return m.checkDense(path)
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

func (m *MoE) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "moe", m.Dim, b.Last(x)))
	}
	name := b.ModuleName(m)
	defer b.Scope(name)()
	if b.TEGroupedFP8(m.impl() == MoEGrouped) && m.ExpertBias { // refuses the experts TE's fp8 is not modelled for (core/te_grouped.go)
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "Megatron's TEGroupedMLP has no expert biases (experts.py asserts add_bias_linear == False)",
			Hint: "drop expert_bias=, or drop float8="}})
	}
	if m.Impl == MoESequential && b.TEGroupedFP8(true) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: "impl=\"sequential\" (Megatron-Core's SequentialMLP) under Transformer Engine's fp8 is not modelled (an fp8 TE MLP per local expert)",
			Hint: "drop float8=, or use impl=\"grouped\" (TEGroupedMLP)"}})
	}
	xin := x
	wholeExperts := b.Par.Etpn() == 1 && b.Par.Tpn() > 1 // expert_tp=1: each rank routes its own sequence-parallel tokens
	if m.gathersAfterDispatch(b) {                       // Megatron's alltoall dispatcher under expert tp (moe_megatron.go)
		wholeExperts = true
	}
	if !wholeExperts {
		x = b.TpGather(x) // tokens gathered along the sequence with SP
	}
	var identity core.Value = core.NoValue
	shared := core.NoValue
	if m.SharedFirst && m.SharedExperts > 0 {
		shared = m.lowerShared(b, xin)
	}
	if m.Jitter {
		x = m.jitter(b, x)
		if m.SparseMixer { // PhimoeTopKRouter multiplies the same tensor again
			x = m.jitter(b, x)
		}
	}
	r := m.route(b, x)
	if m.ZeroExperts > 0 {
		r, identity = m.zeroExperts(b, x, r)
	}
	if m.impl() != MoELoop && b.Quantizes(RoleExpertUp) {
		switch {
		case b.QuantizesExperts() && (m.impl() == MoEGroupedMM || m.impl() == MoEDenseBMM) && b.Par.Epn() == 1: // dequantized on access
		case b.QuantizesExperts():
			panic(core.LowerError{Err: &units.Error{Path: b.Name(""),
				Msg:  "quant_experts=True (bitsandbytes' parametrization of the 3-D experts) is modelled for transformers' grouped_mm experts and Llama 4's dense bmm, without expert parallelism, not impl " + m.impl(),
				Hint: `drop quant_experts (the experts then stay in 16 bit), or use the model's grouped_mm experts`}})
		default:
			if at := b.Name(""); !slices.Contains(b.P.QuantSkipped, at) {
				b.P.QuantSkipped = append(b.P.QuantSkipped, at) // 3-D experts: no nn.Linear for bitsandbytes to replace
			}
			b.P.QuantSkippedAlways = b.P.QuantSkippedAlways || m.impl() == MoEDenseBMM
		}
	}
	var out core.Value
	switch {
	case m.impl() == MoEGrouped || b.Par.Epn() > 1:
		out = m.lowerDispatched(b, x, r)
	case m.impl() == MoEGroupedMM:
		out = m.lowerGroupedMM(b, x, r)
	case m.impl() == MoEDenseBMM:
		out = m.lowerDenseBMM(b, x, r)
	default:
		out = m.lowerLoop(b, x, r)
	}
	if b.Par.Tpn() > 1 && !wholeExperts {
		out = b.TpReduce("moe", out) // expert outputs summed over tensor-parallel ranks
	}
	if identity != core.NoValue {
		out = b.Add("identity_sum", out, b.Cast(identity, b.Dtype(out), "identity_output.to(hidden_states.dtype)"))
	}
	if m.RoutedScale {
		out = b.Ew("mul", "routed_scale", []core.Value{out}, b.Shape(out), b.Dtype(out), "the routed output times routed_scaling_factor: a Python float, nothing saved")
	}
	if shared != core.NoValue {
		out = b.Add("shared_sum", out, shared)
	} else if m.SharedExperts > 0 && m.SharedSumFP32 {
		routed := b.Cast(out, units.FP32, "routed_output.float() (the fp32 combine)")
		shared := b.Cast(m.lowerShared(b, xin), units.FP32, "shared_experts(x).float() (the fp32 combine)")
		out = b.Cast(b.Add("shared_sum", routed, shared), b.Dtype(xin), "the fp32 sum cast back to the input's dtype")
	} else if m.SharedExperts > 0 {
		out = b.Add("shared_sum", out, m.lowerShared(b, xin))
		if m.SharedAverage {
			out = b.Ew("div", "shared_average", []core.Value{out}, b.Shape(out), b.Dtype(out), "(routed + shared) / 2: a scalar division, nothing saved")
		}
	}
	if m.PostNorm != "" {
		out = b.RmsNorm(m.PostNorm, out, m.Dim)
	}
	return out
}

func (m *MoE) InDim() int64  { return m.Dim }
func (m *MoE) OutDim() int64 { return m.Dim }

// ExpertCount is the routed experts, which expert parallelism spreads.
func (m *MoE) ExpertCount() int64 { return m.Experts }
