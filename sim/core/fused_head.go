package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

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

// fusedHeadRefusal is what every loss that reads lm_head's weight itself
// (Liger's, Cut Cross-Entropy, TRL's fused head) refuses: a model without
// a vocabulary and cross-entropy, sequential members, a quantized lm_head
// and a LoRA adapter on it, which the kernel skips. nil when none applies.
func (p *Plan) fusedHeadRefusal() error {
	what := fmt.Sprintf("loss_chunks=%q", p.FusedLoss)
	m := p.Model
	switch {
	case m == nil || m.Vocab <= 0 || (m.Loss != "" && m.Loss != "cross_entropy"):
		return &units.Error{Path: "train", Msg: what + " fuses the output head with cross-entropy: the model has none",
			Hint: "a language model with a vocabulary and the cross-entropy loss"}
	case p.Members > 1 && p.MembersMode == "sequential":
		return &units.Error{Path: "train", Msg: what + " does not combine with sequential members"}
	case p.QuantLMHead:
		return &units.Error{Path: "train", Msg: what + " reads lm_head's weight dense: it cannot be quantized", Hint: "drop quant_lm_head"}
	case p.LoRA != nil && p.LoRA.Adapts(RoleLMHead, m.Head()):
		return &units.Error{Path: "train", Msg: what + " passes lm_head.weight to the kernel, which skips a LoRA adapter on lm_head",
			Hint: "leave lm_head out of lora(targets=...)"}
	}
	return nil
}
