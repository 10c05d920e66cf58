package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The fused attention kernels (flash-attn, SDPA) as Attention lowers them.

// fused lowers flash-attn and SDPA.
func (a *Attention) Fused(b *core.Builder, q, k, v core.Value, s []int64) core.Value {
	d, h, kv := a.Hd(), a.Heads, a.Kv()
	dt := b.Dtype(q)
	var sinks []int32
	if a.Sinks { // a kernel with sinks (flash-attn 3's, vLLM's) reads one logit per head
		sinks = append(sinks, b.Param("sinks", []int64{h}, core.RoleO))
		b.ShardParam(sinks[0], h*b.Par.Tpn())
	}
	ins := []core.Value{q, k, v}
	if a.chunkMask && a.Impl == "sdpa" {
		ins = append(ins, a.sdpaBias(b, s, dt))
	}
	i := b.AddOp("attention", a.Impl+"_attention", ins, sinks...)
	o := b.Out(i, "attn_out", core.WithLast(s, h*d), dt, "attention output")
	lse := b.Out(i, "logsumexp", []int64{core.Rows(s), h}, units.FP32, "attention logsumexp (fp32, saved)")
	b.Val(lse).Grad = false
	b.Save(i, q, k, v, o, lse)
	if len(ins) > 3 {
		b.Save(i, ins[3])
	}
	tokens := core.Rows(s)
	// Backward: fp32 dq accumulator and softmax_d (flash-attn mha_bwd); with
	// GQA, dk and dv are computed expanded to all heads, then summed.
	work := units.FP32.Bytes(tokens*h*d) + units.FP32.Bytes(tokens*h)
	native := a.sdpaGQA(b)
	if kv != h && (a.Impl == "flash" || native) {
		work += 2 * dt.Bytes(tokens*h*d)
	}
	b.Op(i).WorkB = work
	if a.Impl == "flex" {
		b.Op(i).WorkF, b.Op(i).WorkB = flexWork(tokens, h)
	}
	b.Op(i).Flops = a.coreFLOPs(s) * a.docFraction(b, s) // documents: flex_blocks.go
	if a.Impl == "flash" && b.Packed() && (a.PackedMask || a.NoCacheMask) {
		b.Op(i).Syncs = packedFlashSyncs
	}
	if a.Impl == "flash" && b.Docs() != nil && a.Causal && a.Window == 0 && b.Par.Cpn() == 1 {
		b.Op(i).Varlen = true
		b.P.Docs = b.Docs()
	}
	kvSeen := b.Val(k).Bytes + b.Val(v).Bytes
	switch {
	case a.FusedQKV && (!a.RepeatKV || native) && !a.qkvCopies(): // views of one qkv storage
		kvSeen = 2 * dt.Bytes(tokens*kv*d)
	case kv != h && !a.kvNative() && !native: // SDPA reads repeat_kv's copies, made contiguous
		kvSeen = 2 * dt.Bytes(tokens*h*d)
	}
	ringAttention(b, i, q, k, v, kvSeen) // ring buffers with context parallelism
	return o
}
