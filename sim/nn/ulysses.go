package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Context parallelism by DeepSpeed Ulysses (Jacobs et al. 2023,
// arXiv:2309.14509; deepspeed/sequence/layer.py DistributedAttention):
// every rank keeps s/cp tokens of each sequence outside attention, as
// with ring attention (core/tp.go divides the plan's seq by cp). Before
// the attention kernel an all-to-all over the cp ranks turns each of q, k
// and v from [b, s/cp, heads] into [b, s, heads/cp]: the kernel runs on
// the whole sequence with a cp-th of the heads, and a second all-to-all
// turns its output back into [b, s/cp, heads] for the output projection.
// Each all-to-all writes a new tensor of the same size as its input (the
// kernel saves the exchanged q, k and v, and its output, as usual); the
// backward exchanges their gradients the same way. The heads (and the
// key-value heads) of each tensor-parallel rank must divide by cp.
// Unlike the ring's K/V exchange, the all-to-alls sit between the
// projections and the kernel: nothing overlaps them.

// ulyssesHeads exchanges q, k and v for the whole sequence and a cp-th of
// the heads, and returns the attention the kernel then runs and its
// shape; s is the layer input's shape on this rank.
func ulyssesHeads(b *core.Builder, a *Attention, q, k, v core.Value, s []int64) (core.Value, core.Value, core.Value, *Attention, []int64) {
	cp := b.Par.Cpn()
	whole := append([]int64(nil), s...)
	whole[len(whole)-2] *= cp
	la := *a
	la.HeadDim = a.Hd()
	la.Heads = a.Heads / cp
	la.KVHeads = max(a.Kv()/cp, 1)
	exchange := func(name string, x core.Value) core.Value {
		return ulyssesAllToAll(b, name, x, core.WithLast(whole, b.Last(x)/cp),
			name+" for the whole sequence and a cp-th of the heads (Ulysses all-to-all)")
	}
	if q == k { // one fused qkv storage
		qkv := exchange("qkv", q)
		return qkv, qkv, qkv, &la, whole
	}
	return exchange("q", q), exchange("k", k), exchange("v", v), &la, whole
}

// ulyssesBack returns the kernel's output o to this rank's tokens and all
// heads (s is the layer input's shape on this rank).
func ulyssesBack(b *core.Builder, o core.Value, s []int64) core.Value {
	return ulyssesAllToAll(b, "attn_out", o, core.WithLast(s, b.Last(o)*b.Par.Cpn()),
		"attention output back to this rank's tokens and all heads (Ulysses all-to-all)")
}

func ulyssesAllToAll(b *core.Builder, name string, x core.Value, shape []int64, why string) core.Value {
	i := b.AddOp("all_to_all", name+"_all_to_all", []core.Value{x})
	y := b.Out(i, name+"_exchanged", shape, b.Dtype(x), why)
	n := b.Val(y).Bytes
	b.RecordComm("all_to_all", "cp", n, false)
	b.RecordComm("all_to_all", "cp", n, true)
	return y
}

// checkUlysses: each tensor-parallel rank's heads, and key-value heads,
// split over the cp ranks. Its refusals are worded when read
// (units.IntError): a search counts them by the ten thousand.
func (a *Attention) checkUlysses(path string, par core.Parallelism) error {
	cp, n, kv, ok := a.ulyssesSplit(par)
	switch {
	case ok:
		return nil
	case kv:
		return units.NewIntError(path, "cp=%d does not divide the %d key-value heads of each tensor-parallel rank (Ulysses splits them too)",
			"implementations that replicate key-value heads for a larger Ulysses degree are not simulated; use cp_mode=\"ring\" or a smaller cp", cp, n)
	}
	return units.NewIntError(path, "cp=%d does not divide the %d attention heads of each tensor-parallel rank (Ulysses splits heads)",
		"Ulysses needs heads/tp divisible by cp; ring attention (cp_mode=\"ring\") has no such limit", cp, n)
}

// ulyssesSplit is checkUlysses' check: ok when Ulysses' cp ranks split
// each tensor-parallel rank's heads and key-value heads (or there is no
// Ulysses), else cp and the heads (kv: the key-value heads) it does not
// divide.
func (a *Attention) ulyssesSplit(par core.Parallelism) (cp, n int64, kv, ok bool) {
	p := par.Norm()
	if p.CPMode != "ulysses" || p.CP == 1 {
		return 0, 0, false, true
	}
	heads, kvHeads := a.Heads/p.TP, max(a.Kv()/p.TP, 1)
	if heads%p.CP != 0 {
		return p.CP, heads, false, false
	}
	if kvHeads%p.CP != 0 {
		return p.CP, kvHeads, true, false
	}
	return 0, 0, false, true
}
