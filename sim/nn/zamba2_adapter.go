package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Zamba2's adapters (models/zamba2/modeling_zamba2.py at 5.25.0): the
// weights of a shared transformer block are tied across the hybrid
// layers that run it, and each of those calls adds the output of
// adapters of its own, "formally the same as LoRA but used in the base
// model": nn.Sequential(nn.Linear(in, rank, bias=False), nn.Linear(rank,
// out, bias=False)), numbered by the call's place among the hybrid
// layers (linear_q_adapter_list.{i}, gate_up_proj_adapter_list.{i}). No
// dropout and no scaling: y + adapter(x) is one new tensor, the first
// linear keeps x (the projection's own input) and the second the rank-wide
// intermediate.

// rankAdapter adds the adapter name (its modules "0" and "1") of x to y.
func rankAdapter(b *core.Builder, name string, x, y core.Value, in, rank, out int64) core.Value {
	done := b.Scope(name)
	h := b.Linear("0", core.Role(name), x, in, rank, false)
	h = b.Linear("1", core.Role(name), h, rank, out, false)
	done()
	return b.Add(name, y, h)
}

// idleRankAdapters registers PEFT's LoRA adapters (core.Builder.IdleAdapter)
// on the modules of the adapters list (its entries "0" and "1") numbered
// idle: the other calls' slots of this layer's block. Each hybrid layer
// holds a copy of its block (Zamba2Model ties the copies' weights,
// _tied_weights_keys at 5.25.0), every copy with the adapter_list
// entries of all the block's calls, and runs its own only; PEFT gives
// every copy's entries adapters of their own (all-linear on
// zamba2-tiny.json: the first layer's copy holds entries 0 and 2), so
// the others' exist and get no gradient.
func idleRankAdapters(b *core.Builder, list string, idle []int64, in, rank, out int64) {
	for _, j := range idle {
		name := fmt.Sprintf("%s.%d", list, j)
		done := b.Scope(name)
		for _, l := range [...]struct {
			name    string
			in, out int64
		}{{"0", in, rank}, {"1", rank, out}} {
			d := b.Scope(l.name)
			b.IdleAdapter(core.Role(name), l.in, l.out)
			d()
		}
		done()
	}
}

// qkvAdapters adds q's, k's and v's adapters (Zamba2Attention.forward:
// the three projections first, then query_states + linear_q_adapter_list[
// i](hidden_states), k's and v's in turn), and registers LoRA's idle
// adapters on the block's other slots (AdapterIdle; idleRankAdapters).
func (a *Attention) qkvAdapters(b *core.Builder, x, q, k, v core.Value) (core.Value, core.Value, core.Value) {
	in, r := a.InDim(), a.AdapterRank
	list := func(p string) string { return fmt.Sprintf("linear_%s_adapter_list.%d", p, a.AdapterIndex) }
	q, k, v = rankAdapter(b, list("q"), x, q, in, r, in), rankAdapter(b, list("k"), x, k, in, r, in), rankAdapter(b, list("v"), x, v, in, r, in)
	for _, p := range []string{"q", "k", "v"} {
		idleRankAdapters(b, "linear_"+p+"_adapter_list", a.AdapterIdle, in, r, in)
	}
	return q, k, v
}

// AdapterParams are the adapters' weights: 2 x in x rank for each of q,
// k and v.
func (a *Attention) AdapterParams() int64 {
	return 3 * 2 * a.InDim() * a.AdapterRank
}

// checkAdapters: the adapters' output is in wide (attention_hidden_size),
// added to q, k and v, which must be as wide; a wider input or adapters
// go with separate q, k and v projections alone.
func (a *Attention) checkAdapters(path string) error {
	if a.InWidth < 0 || a.AdapterRank < 0 || a.AdapterIndex < 0 {
		return units.Errorf(path, "in_width, adapter_rank and adapter_index must be positive, or 0 (got %d, %d, %d)", a.InWidth, a.AdapterRank, a.AdapterIndex)
	}
	if a.InWidth == 0 && a.AdapterRank == 0 {
		return nil
	}
	if a.FusedQKV || a.OutputGate || a.GateProj || a.GateSoftplus || a.GateSigmoid {
		return units.Errorf(path, "a wider input and adapters are modelled with separate q, k and v projections alone")
	}
	if in, d := a.InDim(), a.Hd(); a.AdapterRank > 0 && (a.Heads*d != in || a.Kv()*d != in) {
		return &units.Error{Path: path, Msg: fmt.Sprintf("q, k and v (%d, %d and %d wide) must be as wide as the adapters' output (%d) they are added to", a.Heads*d, a.Kv()*d, a.Kv()*d, in),
			Hint: "Zamba2's adapters need num_key_value_heads = num_attention_heads and heads x head_dim = 2 x hidden_size"}
	}
	return nil
}
