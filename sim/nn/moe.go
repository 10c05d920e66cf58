package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
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

func (m *MoE) Kind() string           { return "moe" }
func (m *MoE) Label() string          { return m.Name }
func (m *MoE) Children() []core.Layer { return nil }
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
func (m *MoE) Validate(path string) error {
	if err := m.expert().Validate(path); err != nil {
		return err
	}
	if err := core.Positive(path, "experts", m.Experts); err != nil {
		return err
	}
	if m.TopK <= 0 || m.TopK > m.Experts {
		return units.Errorf(path, "top_k must be in 1..experts (experts=%d, top_k=%d)", m.Experts, m.TopK)
	}
	return nil
}

func (m *MoE) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "moe", m.Dim, b.Last(x)))
	}
	name := b.ModuleName(m)
	defer b.Scope(name)()
	xin := x
	wholeExperts := b.Par.Etpn() == 1 && b.Par.Tpn() > 1 // expert_tp=1: each rank routes its own sequence-parallel tokens
	if !wholeExperts {
		x = b.TpGather(x) // tokens gathered along the sequence with SP
	}
	T := core.Rows(b.Shape(x))
	E, k := m.Experts, m.TopK
	logits := b.Linear("router", core.RoleRouter, x, m.Dim, E, false)
	sm := b.AddOp("softmax", "router_softmax", []core.Value{logits})
	probs := b.Out(sm, "router_probs", []int64{T, E}, units.FP32, "router probabilities (fp32)")
	b.Save(sm, probs)
	tk := b.AddOp("topk", "topk", []core.Value{probs})
	weights := b.Out(tk, "routing_weights", []int64{T, k}, units.FP32, "top-k routing weights")
	idx := b.Out(tk, "expert_index", []int64{T, k}, units.INT64, "top-k expert indices")
	b.Val(idx).Grad = false
	b.Save(tk, idx)
	routed := T * k
	if m.Capacity > 1 {
		padded := float64(routed) * m.Capacity
		if padded > float64(units.MaxElements) { // int64(padded) would be undefined
			panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: fmt.Sprintf("capacity=%g pads %.3g token copies to the experts, too many to count in bytes", m.Capacity, padded),
				Hint: units.HintTensor}})
		}
		routed = int64(padded)
	}
	g := b.AddOp("gather", "dispatch", []core.Value{x, idx})
	xs := b.Out(g, "dispatched", []int64{routed, m.Dim}, b.Dtype(x), "tokens copied to their experts")
	b.Save(g, idx)
	received := b.Par.ExpertRows(routed, E, k, m.Capacity > 1) // the busiest rank's share (core/expert.go)
	xs = expertAllToAll(b, "dispatch", xs, received)           // to the ranks holding the experts
	y := expertsForward(b, xs, m, received)
	y = expertAllToAll(b, "combine", y, routed)
	wcast := b.Cast(weights, b.Dtype(y), "routing weights in the expert output dtype")
	wy := b.Mul("weighted", y, wcast)
	c := b.AddOp("index_add", "combine", []core.Value{wy, idx})
	out := b.Out(c, "combined", b.Shape(x), b.Dtype(wy), "expert outputs summed per token")
	b.Save(c, idx)
	if b.Par.Tpn() > 1 && !wholeExperts {
		out = b.TpReduce("moe", out) // expert outputs summed over tensor-parallel ranks
	}
	x = xin
	if m.SharedExperts > 0 {
		sh := m.SharedHidden
		if sh == 0 {
			sh = m.Hidden
		}
		done := b.Scope("shared_experts")
		s := Ffn(b, x, m.Dim, sh*m.SharedExperts, m.Act, false)
		done()
		out = b.Add("shared_sum", out, s)
	}
	return out
}

// experts lowers the routed expert MLPs as grouped matmuls over the routed
// rows, registering each expert's weights separately.
func expertsForward(b *core.Builder, xs core.Value, m *MoE, routed int64) core.Value {
	defer b.Scope("experts")()
	gated := m.expert().gated()
	local, hidden := m.Experts/b.Par.Epn(), m.Hidden/b.Par.Etpn() // this rank's experts and their split
	proj := func(name string, role core.Role, x core.Value, in, out int64) core.Value {
		b.ReserveParams(local) // one tensor per expert
		ps := make([]int32, local)
		full := in * out * b.Par.Etpn()
		for e := range ps {
			ps[e] = b.Param(fmt.Sprintf("%d.%s.weight", e, name), []int64{out, in}, "expert_"+role)
			b.ShardParam(ps[e], full)
		}
		dt := b.Dtype(x)
		if b.Prec.Autocast {
			dt = b.Prec.Compute
		}
		xin := b.Cast(x, dt, "autocast copy of expert input")
		ins := []core.Value{xin}
		for _, p := range ps {
			if w := b.Weight(p, dt); w != core.NoValue {
				ins = append(ins, w)
			}
		}
		i := b.AddOp("grouped_matmul", name, ins, ps...)
		y := b.Out(i, name, []int64{routed, out}, dt, "expert "+name+" output")
		if b.Trainable(ps[0]) {
			b.Save(i, xin)
		}
		if b.Grad(xin) {
			b.Save(i, ins[1:]...)
		}
		b.Op(i).Flops = 2 * float64(routed) * float64(in) * float64(out)
		return y
	}
	if gated {
		fn := "silu"
		if m.Act == "geglu" {
			fn = "gelu"
		}
		gate := proj("gate_proj", core.RoleGate, xs, m.Dim, hidden)
		up := proj("up_proj", core.RoleUp, xs, m.Dim, hidden)
		h := b.Mul("act_mul", Activation(b, fn, gate), up)
		return proj("down_proj", core.RoleDown, h, hidden, m.Dim)
	}
	h := proj("fc1", core.RoleUp, xs, m.Dim, hidden)
	h = Activation(b, m.Act, h)
	return proj("fc2", core.RoleDown, h, hidden, m.Dim)
}

func (m *MoE) InDim() int64  { return m.Dim }
func (m *MoE) OutDim() int64 { return m.Dim }

// ExpertCount is the routed experts, which expert parallelism spreads.
func (m *MoE) ExpertCount() int64 { return m.Experts }

// CheckLayout checks that expert parallelism divides the experts, the
// experts' tensor parallelism their hidden size, and that expert_load
// stays within dropless routing's worst case.
func (m *MoE) CheckLayout(path string, par core.Parallelism) error {
	switch etp, ep := par.ETPn(), max(par.EP, 1); {
	case m.Experts%ep != 0:
		return &units.Error{Path: path, Msg: fmt.Sprintf("ep=%d does not divide %d experts", ep, m.Experts)}
	case m.Hidden%etp != 0:
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide the expert hidden size %d", etp, m.Hidden)}
	case par.ExpertLoad > core.ExpertWorstLoad(ep, m.Experts, m.TopK):
		return &units.Error{Path: path, Msg: fmt.Sprintf("expert_load=%g exceeds the worst case of %g balanced shares (ep=%d, %d experts, top-%d)", par.ExpertLoad, core.ExpertWorstLoad(ep, m.Experts, m.TopK), ep, m.Experts, m.TopK),
			Hint: "the worst case is every token of the ep ranks choosing min(top_k, experts/ep) of one rank's experts: expert_load=\"worst\""}
	}
	return nil
}
