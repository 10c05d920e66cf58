package core

import "github.com/memsh/memsh/sim/units"

// fusedHead is what a loss that runs lm_head inside itself starts from
// (Liger's fused linear cross-entropy, liger.go; torchtitan's
// ChunkedLossWrapper, titan_loss.go): lm_head's weight and bias,
// registered under lm_head (tied to the embedding where the model ties
// them), the labels, the dtype the head's matmuls compute in (autocast's
// where it runs) and the weight as they read it: its autocast copy, which
// no gradient flows through, or NoValue when it is read as stored.
type fusedHead struct {
	w       int32
	params  []int32
	labels  Value
	compute units.DType
	wv      Value
}

// openFusedHead registers lm_head's parameters and opens the loss scope,
// whose closing function it returns with the head.
func (b *Builder) openFusedHead(m *Model, x Value, d int64) (fusedHead, func()) {
	var h fusedHead
	done := b.Scope(m.Head())
	tp := b.Par.Tpn() // column-parallel over the vocabulary (ChunkedLossWrapper alone runs under tp)
	h.w, h.params = b.LinearParams(RoleLMHead, d, m.Vocab/tp, m.HeadBias)
	if tp > 1 {
		b.ShardParam(h.w, m.Vocab*d)
		if len(h.params) > 1 {
			b.ShardParam(h.params[1], m.Vocab)
		}
	}
	if t := b.embedWeight(m); t >= 0 {
		b.P.Params[h.w].TiedTo = t
	}
	done()
	closeLoss := b.Scope("loss")
	h.labels = b.Labels(x)
	h.compute = b.Dtype(x)
	if b.Prec.Autocast {
		h.compute = b.Prec.Compute
	}
	h.wv = b.Weight(h.w, h.compute)
	if h.wv != NoValue {
		b.Val(h.wv).Grad = false
	}
	return h, closeLoss
}
