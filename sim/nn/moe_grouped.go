package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// lowerDispatched runs the experts the way Megatron-LM does (token
// dispatcher "alltoall", megatron/core/transformer/moe/token_dispatcher.py
// and experts.py; torchtitan likewise): the routed copies of this rank's
// tokens are permuted into one buffer sorted by expert (the permutation
// saves its indices), exchanged over the expert-parallel group when ep > 1
// (expert.go), run through one grouped GEMM per projection over this
// rank's experts, exchanged back, weighted by the routing weights and
// summed per token (unpermute: the weighting saves both operands, the
// scatter-add its indices). It is impl "grouped", and every impl under
// expert parallelism.
func (m *MoE) lowerDispatched(b *core.Builder, x core.Value, r routing) core.Value {
	ep := b.Par.Epn()
	if m.impl() == MoELoop && ep > 1 && (b.Quantizes(RoleExpertUp) || b.Lora != nil) {
		// A refusal of the layout (ep), not of the model: a search rejects
		// its ep > 1 layouts and keeps the rest.
		panic(&core.LayoutError{Err: &units.Error{Path: b.Name(""),
			Msg:  "quant= or lora= with expert parallelism on nn.Linear experts is not modelled (bitsandbytes and PEFT run one rank's nn.Linear experts)",
			Hint: "drop ep= for QLoRA or LoRA, or model the experts as impl=\"grouped\""}})
	}
	done := b.Scope("experts")
	b.ReserveParams(m.Experts / ep) // one tensor (or one pass of the loop) per expert at least
	done()
	rows, err := m.loads(r.tokens, ep)
	if err != nil {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: err.Error(), Hint: units.HintTensor}})
	}
	// The busiest rank receives what the layout's expert_load says
	// (core/expert.go); with a capacity factor, its experts' padded
	// capacity.
	recv := b.Par.ExpertRows(r.tokens*m.TopK, m.Experts, m.TopK, false)
	if m.Capacity > 0 {
		recv = sum64(rows)
	}
	send := r.tokens * m.TopK
	if m.Capacity > 0 {
		send = rows[0] / ep * m.Experts // capacity rows per expert from this rank, padded
	}
	g := b.AddOp("gather", "permute", []core.Value{x, r.idx})
	xs := b.Out(g, "permuted", []int64{send, m.Dim}, b.Dtype(x), "routed copies of the tokens, sorted by expert")
	b.Save(g, r.idx)
	b.Op(g).WorkB = b.Val(x).Bytes // the scatter-add of the gradient into zeros of the input's shape
	// Megatron's host syncs (moe_megatron_sync.go): the permute's here.
	syncs := m.megatronSyncPlan(b, int64(len(rows)))
	b.Op(g).Syncs = syncs.permute
	xs = expertAllToAll(b, "dispatch", xs, recv)
	received := xs
	if m.megatronGrouped(b) {
		m.onNCCLStream(b, xs)
		out := m.lowerWeightedExperts(b, x, xs, r, send, recv, int64(len(rows)), syncs)
		if m.Capacity == 0 {
			m.markMegatronHost(b, r.first, g, int32(len(b.P.Ops)-1)) // moe_megatron_host.go
		}
		return out
	}
	y := m.groupedFfn(b, xs, int64(len(rows)), core.NoValue)
	y = expertAllToAll(b, "combine", y, send)
	m.markRouted(b, received, y, recv)
	w := b.Cast(r.weights, b.Dtype(y), "routing weights in the expert output dtype")
	return weightedUnpermute(b, x, y, w, r.idx, send, m.Dim)
}

// fusedWeights are the experts' 3-D parameters (fused_loop and grouped):
// [experts, out, in] per projection, gate and up fused into one tensor.
type fusedWeights struct {
	gateUp, down         int32
	up                   int32 // GLUParams' v1, -1 when gate and up are one tensor
	gateUpBias, downBias int32 // -1 without expert biases
	// gateUpLoRA and downLoRA are the weights the forward reads when
	// PEFT wraps the parameter (core.Builder.ParamLoRA: W merged with its
	// adapters), NoValue otherwise.
	gateUpLoRA, downLoRA core.Value
	// gateUpQ and downQ are the weights dequantized from their 4-bit
	// storage when the plan quantizes the experts (quant_experts),
	// NoValue otherwise.
	gateUpQ, downQ core.Value
}

// read is the weight the experts' forward reads for parameter p: PEFT's
// merged weight, else the dequantized one, else NoValue (the parameter).
func (fw *fusedWeights) read(p int32) core.Value {
	if w := fw.merged(p); w != core.NoValue {
		return w
	}
	return fw.dequantized(p)
}

// dequantized is the dequantized weight of parameter p, NoValue when the
// experts are not quantized.
func (fw *fusedWeights) dequantized(p int32) core.Value {
	if fw == nil {
		return core.NoValue
	}
	return fw.of(p, fw.gateUpQ, fw.downQ)
}

// merged is the weight PEFT's ParamWrapper makes of parameter p, NoValue
// when p is not wrapped.
func (fw *fusedWeights) merged(p int32) core.Value {
	if fw == nil {
		return core.NoValue
	}
	return fw.of(p, fw.gateUpLoRA, fw.downLoRA)
}

// of is gateUp's value for parameter gate_up_proj (or up_proj), down's for
// down_proj, NoValue for any other.
func (fw *fusedWeights) of(p int32, gateUp, down core.Value) core.Value {
	switch p {
	case fw.gateUp:
		return gateUp
	case fw.down:
		return down
	}
	return core.NoValue
}

// registerFused registers this rank's expert weights as 3-D parameters
// (in the experts' scope).
func (m *MoE) registerFused(b *core.Builder) fusedWeights {
	tp := b.Par.Etpn()
	E := m.Experts / b.Par.Epn()
	h := m.Hidden / tp
	up, down := "gate_up_proj", "down_proj"
	upRows := 2 * h
	if !m.expertMLP().gated() {
		up, upRows = "up_proj", h
	}
	if m.GLUParams {
		return m.registerGLU(b)
	}
	fw := fusedWeights{gateUpBias: -1, downBias: -1, up: -1, gateUpQ: core.NoValue, downQ: core.NoValue}
	fw.gateUp = b.Param(up, []int64{E, upRows, m.Dim}, RoleExpertUp)
	b.ShardParam(fw.gateUp, m.Experts*upRows*tp*m.Dim)
	fw.down = b.Param(down, []int64{E, m.Dim, h}, RoleExpertDown)
	b.ShardParam(fw.down, m.Experts*m.Dim*m.Hidden)
	if m.ExpertBias {
		fw.gateUpBias = b.Param(up+"_bias", []int64{E, upRows}, RoleExpertUp)
		b.ShardParam(fw.gateUpBias, m.Experts*upRows*tp)
		fw.downBias = b.Param(down+"_bias", []int64{E, m.Dim}, RoleExpertDown)
		b.ShardParam(fw.downBias, m.Experts*m.Dim)
	}
	if b.QuantizesExperts() { // Axolotl's quantize_moe_experts (core/quant_experts.go): PEFT's merge reads them
		fw.gateUpQ, fw.downQ = b.DequantizedExperts(fw.gateUp), b.DequantizedExperts(fw.down)
	}
	fw.gateUpLoRA, fw.downLoRA = b.ParamLoRAFrom(fw.gateUp, up, fw.gateUpQ), b.ParamLoRAFrom(fw.down, down, fw.downQ)
	return fw
}

// groupedFfn runs this rank's experts over their received rows: one
// grouped GEMM per projection (impl "grouped", 3-D weights), or for the
// other impls the same shapes with one weight tensor per expert.
//
// probs, when set, are the received rows' routing weights, applied to
// the activation (Megatron-Core 0.13: lowerWeightedExperts).
func (m *MoE) groupedFfn(b *core.Builder, xs core.Value, local int64, probs core.Value) core.Value {
	defer b.Scope("experts")()
	recv := b.Shape(xs)[0]
	te := m.impl() == MoEGrouped && b.TEGroupedFP8(true)
	if te { // Megatron's TEGroupedMLP pads each expert's rows for fp8 (core/te_grouped.go)
		xs = b.TEFP8Pad(xs, local, "permuted")
		if probs != core.NoValue {
			probs = b.TEFP8Pad(probs, local, "permuted_probs")
		}
	}
	rows := b.Shape(xs)[0]
	hidden := m.Hidden / b.Par.Etpn()
	var fw *fusedWeights
	if m.impl() != MoELoop {
		w := m.registerFused(b)
		fw = &w
		if w.gateUpLoRA != core.NoValue || w.downLoRA != core.NoValue {
			panic(core.LowerError{Err: &units.Error{Path: b.Name(""),
				Msg:  "PEFT's LoRA on the 3-D experts (lora.ParamWrapper) is modelled for transformers' own experts (grouped_mm, eager) without expert parallelism, not for impl \"grouped\" or ep > 1",
				Hint: "drop ep=, or target no expert (PEFT converts all-linear and the 4.x expert names on this model: name the attention projections)"}})
		}
	}
	gateName, upName, downName := m.projNames()
	proj := func(name string, role core.Role, x core.Value, in, out int64, fused int32) core.Value {
		if te { // gate and up are Megatron's one fc1: its scaling state once
			return b.TEGroupedLinear(name, role, x, fused, local, in, out, role != RoleExpertUp || !m.expertMLP().gated())
		}
		var ps []int32
		if fw != nil {
			ps = []int32{fused}
		} else {
			b.ReserveParams(local) // one tensor per expert
			ps = make([]int32, local)
			full := in * out * b.Par.Etpn()
			for e := range ps {
				ps[e] = b.Param(fmt.Sprintf("%d.%s.weight", e, name), []int64{out, in}, role)
				b.ShardParam(ps[e], full)
			}
		}
		dt := b.Dtype(x)
		if b.Prec.Autocast {
			dt = b.Prec.Compute
		}
		xin := b.Cast(x, dt, "autocast copy of expert input")
		ins := []core.Value{xin}
		if fw == nil {
			for _, p := range ps {
				if w := b.Weight(p, dt); w != core.NoValue {
					ins = append(ins, w)
				}
			}
		} else if w := b.Weight(fused, dt); w != core.NoValue {
			ins = append(ins, w)
		}
		i := b.AddOp("grouped_matmul", name, ins, ps...)
		b.Op(i).TEGemm = m.megatronGrouped(b) && m.Impl != MoESequential // TEGroupedMLP's GroupedLinear in bf16 (core/te_grouped.go teGroupedSeen)
		y := b.Out(i, name, []int64{rows, out}, dt, "expert "+name+" output")
		if b.Trainable(ps[0]) {
			b.Save(i, xin)
		}
		if b.Grad(xin) {
			b.Save(i, ins[1:]...)
		}
		b.Op(i).Flops = 2 * float64(rows) * float64(in) * float64(out)
		return y
	}
	var gu, dn int32 = -1, -1
	if fw != nil {
		gu, dn = fw.gateUp, fw.down
	}
	weigh := func(h core.Value) core.Value {
		if probs == core.NoValue {
			return h
		}
		w := b.Mul("weighted", h, probs) // eager: intermediate * permuted_probs
		if m.megatronGrouped(b) {
			// TEGroupedMLP casts the product back, intermediate_parallel.to(
			// original_dtype) (megatron/core/transformer/moe/experts.py at
			// d98e8a64dd, l.1013-1015 and l.958-960): with fp32 probs
			// (--moe-router-dtype fp32) fc2 reads and saves the activation's
			// dtype, not the fp32 product, and its output, the layer's, stays
			// in it
			w = b.Cast(w, b.Dtype(h), "weighted activation cast back to its dtype (.to(original_dtype))")
		}
		return w
	}
	if !m.expertMLP().gated() {
		h := proj(upName, RoleExpertUp, xs, m.Dim, hidden, gu)
		h = weigh(Activation(b, m.Act, h))
		y := proj(downName, RoleExpertDown, h, hidden, m.Dim, dn)
		if te {
			y = b.TEFP8Unpad(y, recv)
		}
		return y
	}
	fn := "silu"
	if m.Act == "geglu" {
		fn = "gelu"
	}
	upw := gu
	if fw != nil && fw.up >= 0 { // GLUParams' v1
		upw = fw.up
	}
	gate := proj(gateName, RoleExpertGate, xs, m.Dim, hidden, gu)
	up := proj(upName, RoleExpertUp, xs, m.Dim, hidden, upw)
	var h core.Value
	switch {
	case b.MegatronKernels() && fn == "silu":
		h = b.FusedGLU(fn, gate, up, probs) // WeightedSwiGLUFunction with probs
	default:
		h = weigh(m.gatedAct(b, fn, gate, up))
	}
	y := proj(downName, RoleExpertDown, h, hidden, m.Dim, dn)
	if te {
		y = b.TEFP8Unpad(y, recv)
	}
	return y
}

// fusedSlice is expert e's projection in the fused loop: its slice of
// the 3-D parameter p (a view), cast per call under autocast (a view is
// not a leaf: autocast's weight cache does not keep it), and the matmul.
// merged is PEFT's merged weight the loop slices instead of p
// (core.Builder.ParamLoRA; NoValue: none): it requires grad, so the
// matmul saves its input, and the slice when the input needs a gradient.
func (m *MoE) fusedSlice(b *core.Builder, e int64, name string, x core.Value, in, out int64, p, bias int32, merged core.Value) core.Value {
	// A 3-D weight is no module: its matmul runs in the experts module
	// (DbrxExpertGLU's in its own, the experts' mlp), named by the weight.
	op := name
	dt := b.Dtype(x)
	if b.Prec.Autocast {
		dt = b.Prec.Compute
	}
	xin := b.Cast(x, dt, "autocast copy of expert input")
	var params []int32
	if merged == core.NoValue {
		params = append(params, p)
	}
	if bias >= 0 {
		params = append(params, bias)
	}
	ins := []core.Value{xin}
	switch {
	case merged != core.NoValue && b.Dtype(merged) != dt:
		c := b.AddOp("cast", "weight_to_"+dt.Name(), []core.Value{merged})
		ins = append(ins, b.Out(c, "weight."+dt.Name(), []int64{out, in}, dt, fmt.Sprintf("expert %d's slice of the merged %s in the compute dtype", e, name)))
	case merged != core.NoValue:
		ins = append(ins, merged) // its slice: a view of the merged weight
	case b.Prec.Params != dt:
		c := b.AddOp("cast", "weight_to_"+dt.Name(), nil, p)
		wv := b.Out(c, "weight."+dt.Name(), []int64{out, in}, dt, fmt.Sprintf("expert %d's slice of %s in the compute dtype", e, name))
		b.Val(wv).Cat = core.CatParams
		ins = append(ins, wv)
	}
	i := b.AddOp("matmul", op, ins, params...)
	y := b.Out(i, "out", []int64{core.Rows(b.Shape(xin)), out}, dt, "output of expert "+core.Itoa(e)+"'s "+name)
	if b.Trainable(p) || merged != core.NoValue {
		b.Save(i, xin)
	}
	if b.Grad(xin) && len(ins) > 1 {
		b.Save(i, ins[1])
	}
	b.Op(i).Flops = 2 * float64(core.Rows(b.Shape(xin))) * float64(in) * float64(out)
	b.Op(i).Bytes += float64(b.Val(xin).Bytes) + float64(dt.Bytes(in*out))
	return y
}
