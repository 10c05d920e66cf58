package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// MTP is one multi-token prediction module (DeepSeek-V3, section 2.2;
// Megatron's MultiTokenPredictionLayer): from the trunk's last hidden
// state h (before the final norm) and the embeddings of the tokens one
// step ahead it predicts one more token:
//
//	h' = block(eh_proj(cat(enorm(embed(next tokens)), hnorm(h))))
//	loss += cross_entropy(head(shared_head.norm(h')))
//
// The embedding and the output head are the main model's, shared in
// training (DeepSeek's and Megatron's); a checkpoint stores copies of
// them with the module (DeepSeek-V3's model.layers.61), which Params does
// not count. The module passes h through unchanged to the main head; its
// own loss joins the step's backward. Its block is lowered without
// activation checkpointing.
type MTP struct {
	Name  string
	Dim   int64
	Vocab int64
	Block core.Layer // a decoder layer (DeepSeek-V3: an MoE layer)
}

func (m *MTP) Kind() string           { return "mtp" }
func (m *MTP) Label() string          { return m.Name }
func (m *MTP) Children() []core.Layer { return []core.Layer{m.Block} }
func (m *MTP) InDim() int64           { return m.Dim }
func (m *MTP) OutDim() int64          { return m.Dim }

// Params: enorm, hnorm, eh_proj, the block, shared_head.norm.
func (m *MTP) Params() int64 { return 3*m.Dim + 2*m.Dim*m.Dim + m.Block.Params() }

func (m *MTP) Summary() string {
	return fmt.Sprintf("predicts one token further: %s, head %d -> %d (shared)", m.Block.Kind(), m.Dim, m.Vocab)
}

func (m *MTP) Validate(path string) error {
	if err := core.Positive(path, "dim", m.Dim); err != nil {
		return err
	}
	if err := core.Positive(path, "vocab", m.Vocab); err != nil {
		return err
	}
	return m.Block.Validate(core.ChildPath(path, m, m.Block))
}

func (m *MTP) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != m.Dim {
		panic(core.ShapeMismatch(b, "mtp", m.Dim, b.Last(x)))
	}
	defer b.Scope(b.ModuleName(m))()
	// The next tokens' embeddings: a lookup of the shared table. On a
	// later pipeline stage the token ids arrive with the labels (Megatron
	// places the MTP module on the last stage) and the stage holds its own
	// copy of the embedding, kept in step like tied embeddings.
	ids := b.P.Input
	if ids == core.NoValue || b.Dtype(ids) != units.INT64 {
		i := b.AddOp("recv", "input_ids", nil)
		ids = b.Out(i, "input_ids", []int64{b.Batch, b.Seq}, units.INT64, "token ids for the MTP module on this pipeline stage")
	}
	first := int32(len(b.P.Params))
	e := (&Embedding{Name: "embed_tokens", Rows: m.Vocab, Dim: m.Dim}).Lower(b, ids)
	for pi := int32(0); pi < first; pi++ {
		if b.P.Params[pi].Role == core.RoleEmbed {
			b.P.Params[first].TiedTo = pi // the main model's embedding
			break
		}
	}
	en := b.RmsNorm("enorm", e, m.Dim)
	hn := b.RmsNorm("hnorm", x, m.Dim)
	dt := core.Promote(b.Dtype(en), b.Dtype(hn))
	cat := b.Ew("cat", "concat", []core.Value{en, hn}, core.WithLast(b.Shape(hn), 2*m.Dim), dt, "normalised embeddings and hidden states concatenated")
	h := b.Linear("eh_proj", core.RoleLinear, cat, 2*m.Dim, m.Dim, false)
	h = b.LowerChild(m.Block, h)
	done := b.Scope("shared_head")
	h = b.RmsNorm("norm", h, m.Dim)
	tp := b.Par.Tpn()
	logits := b.ColLinear("head", core.RoleLMHead, h, b.TpGather(h), m.Dim, m.Vocab, m.Vocab/tp, false) // tied to lm_head (core.Model)
	b.CrossEntropy(logits, true)
	done()
	return x
}
