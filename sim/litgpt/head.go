package litgpt

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// LitHead is LitGPT's output head as its training loop runs it:
// lm_head per 128-token chunk, Fabric's fp32 conversion of the outputs,
// chunked_cross_entropy. It returns the loss.
type LitHead struct {
	Config Config
}

func (h *LitHead) Kind() string { return "litgpt_head" }

func (h *LitHead) Label() string { return "" }

func (h *LitHead) Children() []core.Layer { return nil }

func (h *LitHead) Summary() string {
	return "lm_head " + core.Itoa(h.Config.Embd) + " -> " + core.Itoa(h.Config.PaddedVocab) + " per " + core.Itoa(h.Config.chunk()) + " tokens, fp32 cross-entropy"
}

func (h *LitHead) InDim() int64 { return h.Config.Embd }

func (h *LitHead) Params() int64 {
	c := h.Config
	n := c.Embd * c.PaddedVocab
	if c.LMHeadBias {
		n += c.PaddedVocab
	}
	if c.Adapter == "v2" {
		n += 2 * c.PaddedVocab
	}
	return n
}

func (h *LitHead) Validate(path string) error {
	return core.Positive(path, "vocab", h.Config.PaddedVocab)
}

func (h *LitHead) Lower(b *core.Builder, x core.Value) core.Value {
	c := h.Config
	o := core.HeadLoss{ChunkTokens: c.chunk(), UpcastAfterForward: true, KeepLogits: true, PerTokenLoss: true}
	if c.Adapter == "v2" {
		return litAdapterV2Head(b, c, x, o)
	}
	return b.ChunkedHeadLoss(x, c.PaddedVocab, c.LMHeadBias, o, -1)
}

// litAdapterV2Head is the chunked head with AdapterV2Linear's trainable
// bias and scale on every chunk.
func litAdapterV2Head(b *core.Builder, c Config, x core.Value, o core.HeadLoss) core.Value {
	in, vocab := c.Embd, c.PaddedVocab
	s := b.Shape(x)
	batch, seq := core.Numel(s[:len(s)-2]), s[len(s)-2]
	done := b.Scope("lm_head")
	w, params := b.LinearParams(core.RoleLMHead, in, vocab, c.LMHeadBias)
	ab := b.AdapterParam("adapter_bias", []int64{vocab}, core.RoleAdapter)
	as := b.AdapterParam("adapter_scale", []int64{vocab}, core.RoleAdapter)
	lengths := o.ChunkLengths(seq)
	logits := make([]core.Value, len(lengths))
	for i, n := range lengths {
		shape := []int64{batch, n, vocab}
		y := b.HeadChunk(w, params, x, n, in, vocab)
		ia := b.AddOp("add", "add_bias", []core.Value{y}, ab)
		sb := b.Out(ia, "biased", shape, b.Dtype(y), "lm_head(x) + adapter_bias")
		im := b.AddOp("mul", "scale", []core.Value{sb}, as)
		logits[i] = b.Out(im, "scaled", shape, b.Dtype(y), "adapter_scale * (lm_head(x) + adapter_bias)")
		b.Save(im, sb)
	}
	done()
	defer b.Scope("loss")()
	up := make([]core.Value, len(logits))
	for i, l := range logits {
		up[i] = b.CastChunk(i, l)
	}
	b.Release("convert_output", logits)
	var losses []core.Value
	var tokens int64
	labels := b.Labels(x)
	for i, l := range up {
		n := lengths[i]
		if i == len(lengths)-1 {
			n--
		}
		losses = append(losses, b.ChunkCE(i, l, b.LabelChunk(labels, i, n, true), batch, n, vocab, true))
		tokens += batch * n
	}
	b.P.Held = append(b.P.Held, up...)
	ic := b.AddOp("cat", "cat", losses)
	all := b.Out(ic, "losses", []int64{tokens}, units.FP32, "per-token losses of all chunks (torch.cat)")
	im := b.AddOp("mean", "mean", []core.Value{all})
	return b.Out(im, "loss", nil, units.FP32, "loss")
}
