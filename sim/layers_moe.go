package sim

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// MoE is a mixture-of-experts feed-forward block with a linear router,
// top-k routing and gated expert MLPs, lowered as Hugging Face Mixtral
// runs it: router softmax in fp32, top-k, each token copied to its k
// experts, expert MLPs over the routed rows, weighted and index_add-ed back.
// Routing is assumed balanced (every expert gets tokens*top_k/experts rows);
// Capacity > 1 models a token capacity factor (padding to capacity).
type MoE struct {
	Name          string
	Dim           int64
	Hidden        int64
	Experts       int64
	TopK          int64
	Act           string
	SharedExperts int64
	SharedHidden  int64 // 0 = Hidden
	Capacity      float64
}

func (m *MoE) expert() *MLP { return &MLP{Dim: m.Dim, Hidden: m.Hidden, Act: m.Act} }

func (m *MoE) Kind() string      { return "moe" }
func (m *MoE) Label() string     { return m.Name }
func (m *MoE) Children() []Layer { return nil }
func (m *MoE) Params() int64 {
	n := m.Dim*m.Experts + m.Experts*m.expert().Params()
	if m.SharedExperts > 0 {
		sh := m.SharedHidden
		if sh == 0 {
			sh = m.Hidden
		}
		n += (&MLP{Dim: m.Dim, Hidden: sh * m.SharedExperts, Act: m.Act}).Params()
	}
	return n
}
func (m *MoE) Summary() string {
	return fmt.Sprintf("%d experts (top-%d), %d -> %d, %s", m.Experts, m.TopK, m.Dim, m.Hidden, m.Act)
}
func (m *MoE) validate(path string) error {
	if err := m.expert().validate(path); err != nil {
		return err
	}
	if err := positive(path, "experts", m.Experts); err != nil {
		return err
	}
	if m.TopK <= 0 || m.TopK > m.Experts {
		return units.Errorf(path, "top_k must be in 1..experts (experts=%d, top_k=%d)", m.Experts, m.TopK)
	}
	return nil
}

func (m *MoE) lower(b *builder, x Value) Value {
	if b.last(x) != m.Dim {
		panic(shapeMismatch(b, "moe", m.Dim, b.last(x)))
	}
	name := m.Name
	if name == "" {
		name = "moe"
	}
	defer b.scope(name)()
	xin := x
	x = b.tpGather(x) // tp.go: tokens gathered along the sequence with SP
	T := rows(b.shape(x))
	E, k := m.Experts, m.TopK
	logits := b.linear("router", "router", x, m.Dim, E, false)
	sm := b.addOp("softmax", "router_softmax", []Value{logits})
	probs := b.out(sm, "router_probs", []int64{T, E}, units.FP32, "router probabilities (fp32)")
	b.save(sm, probs)
	tk := b.addOp("topk", "topk", []Value{probs})
	weights := b.out(tk, "routing_weights", []int64{T, k}, units.FP32, "top-k routing weights")
	idx := b.out(tk, "expert_index", []int64{T, k}, units.INT64, "top-k expert indices")
	b.val(idx).grad = false
	b.save(tk, idx)
	routed := T * k
	if m.Capacity > 1 {
		padded := float64(routed) * m.Capacity
		if padded > float64(units.MaxElements) { // int64(padded) would be undefined
			panic(lowerError{&units.Error{Path: b.name(""), Msg: fmt.Sprintf("capacity=%g pads %.3g token copies to the experts, too many to count in bytes", m.Capacity, padded),
				Hint: units.HintTensor}})
		}
		routed = int64(padded)
	}
	g := b.addOp("gather", "dispatch", []Value{x, idx})
	xs := b.out(g, "dispatched", []int64{routed, m.Dim}, b.dtype(x), "tokens copied to their experts")
	b.save(g, idx)
	xs = expertAllToAll(b, "dispatch", xs) // expert.go: to the ranks holding the experts
	y := expertsForward(b, xs, m, routed)
	y = expertAllToAll(b, "combine", y)
	wcast := b.cast(weights, b.dtype(y), "routing weights in the expert output dtype")
	wy := b.mul("weighted", y, wcast)
	c := b.addOp("index_add", "combine", []Value{wy, idx})
	out := b.out(c, "combined", b.shape(x), b.dtype(wy), "expert outputs summed per token")
	b.save(c, idx)
	if b.par.tpn() > 1 {
		out = b.tpReduce("moe", out) // tp.go: expert outputs summed over tensor-parallel ranks
	}
	x = xin
	if m.SharedExperts > 0 {
		sh := m.SharedHidden
		if sh == 0 {
			sh = m.Hidden
		}
		done := b.scope("shared_experts")
		s := ffn(b, x, m.Dim, sh*m.SharedExperts, m.Act, false)
		done()
		out = b.add("shared_sum", out, s)
	}
	return out
}

// experts lowers the routed expert MLPs as grouped matmuls over the routed
// rows, registering each expert's weights separately.
func expertsForward(b *builder, xs Value, m *MoE, routed int64) Value {
	defer b.scope("experts")()
	gated := m.expert().gated()
	local, hidden := m.Experts/b.par.epn(), m.Hidden/b.par.tpn() // expert.go: this rank's experts and their split
	proj := func(name, role string, x Value, in, out int64) Value {
		b.reserveParams(local) // checked.go: one tensor per expert
		ps := make([]int32, local)
		full := in * out * b.par.tpn()
		for e := range ps {
			ps[e] = b.param(fmt.Sprintf("%d.%s.weight", e, name), []int64{out, in}, "expert_"+role)
			b.shardParam(ps[e], full)
		}
		dt := b.dtype(x)
		if b.prec.Autocast {
			dt = b.prec.Compute
		}
		xin := b.cast(x, dt, "autocast copy of expert input")
		ins := []Value{xin}
		for _, p := range ps {
			if w := b.weight(p, dt); w != NoValue {
				ins = append(ins, w)
			}
		}
		i := b.addOp("grouped_matmul", name, ins, ps...)
		y := b.out(i, name, []int64{routed, out}, dt, "expert "+name+" output")
		if b.trainable(ps[0]) {
			b.save(i, xin)
		}
		if b.grad(xin) {
			b.save(i, ins[1:]...)
		}
		b.op(i).Flops = 2 * float64(routed) * float64(in) * float64(out)
		return y
	}
	if gated {
		fn := "silu"
		if m.Act == "geglu" {
			fn = "gelu"
		}
		gate := proj("gate_proj", "gate", xs, m.Dim, hidden)
		up := proj("up_proj", "up", xs, m.Dim, hidden)
		h := b.mul("act_mul", activation(b, fn, gate), up)
		return proj("down_proj", "down", h, hidden, m.Dim)
	}
	h := proj("fc1", "up", xs, m.Dim, hidden)
	h = activation(b, m.Act, h)
	return proj("fc2", "down", h, hidden, m.Dim)
}

func (m *MoE) InDim() int64  { return m.Dim }
func (m *MoE) OutDim() int64 { return m.Dim }

// ExpertCount is the routed experts, which expert parallelism spreads.
func (m *MoE) ExpertCount() int64 { return m.Experts }

// CheckLayout checks that expert parallelism divides the experts and tensor
// parallelism the expert hidden size.
func (m *MoE) CheckLayout(path string, par Parallelism) error {
	switch tp, ep := max(par.TP, 1), max(par.EP, 1); {
	case m.Experts%ep != 0:
		return &units.Error{Path: path, Msg: fmt.Sprintf("ep=%d does not divide %d experts", ep, m.Experts)}
	case m.Hidden%tp != 0:
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide the expert hidden size %d", tp, m.Hidden)}
	}
	return nil
}
