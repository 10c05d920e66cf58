package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// AddEmbedding adds a learned table lookup to its input: the learned
// position embeddings of GPT-2 (wpe), OPT and BERT, and BERT's token-type
// embeddings. It is nn.Embedding(rows, dim) read with ids the model makes
// itself (positions, or token types), then added to the hidden states:
//
//	hidden = hidden + table(ids)
//
// The ids are int64 and saved for the embedding's backward
// (embedding_dense_backward needs the indices); the add saves nothing.
// PerSample says whether the ids have one row per sequence ([batch, seq]:
// OPT's positions come from the attention mask's cumsum, BERT's token
// types are expanded to the batch) or one row broadcast over the batch
// ([1, seq]: GPT-2's and BERT's position_ids), which decides the size of
// the looked-up tensor.
type AddEmbedding struct {
	Name      string
	Rows, Dim int64
	PerSample bool
	// MaxSeq is the longest sequence the table serves (positions); 0 = any
	// (token types). OPT keeps 2 extra rows (its position offset), so its
	// MaxSeq is Rows-2.
	MaxSeq int64
	// BufferIDs says the ids are a slice or an expand of the module's own
	// non-persistent buffer (BERT's position_ids[:, :seq]; transformers
	// 4.x's token_type_ids[:, :seq].expand(batch, seq)): no new storage,
	// and what the lookup saves for its backward is that buffer. Else the
	// ids are a new int64 tensor of the output's rows.
	BufferIDs bool
	// Buffer names the module's non-persistent int64 buffer [1,
	// BufferLen] the ids are read from (BERT's and RoBERTa's position_ids
	// and token_type_ids, max_position_embeddings long, registered by
	// BertEmbeddings.__init__ whatever the forward is handed); "" = none.
	Buffer    string
	BufferLen int64
}

func (e *AddEmbedding) Kind() string           { return "add_embedding" }
func (e *AddEmbedding) Label() string          { return e.Name }
func (e *AddEmbedding) DefaultName() string    { return "pos_embed" }
func (e *AddEmbedding) Children() []core.Layer { return nil }
func (e *AddEmbedding) Params() int64          { return e.Rows * e.Dim }
func (e *AddEmbedding) InDim() int64           { return e.Dim }
func (e *AddEmbedding) OutDim() int64          { return e.Dim }
func (e *AddEmbedding) Summary() string {
	s := fmt.Sprintf("%d x %d", e.Rows, e.Dim)
	if e.PerSample {
		s += ", per sample"
	}
	return s
}

func (e *AddEmbedding) Validate(path string) error {
	if err := core.Positive(path, "rows", e.Rows); err != nil {
		return err
	}
	if err := core.CheckVocab(path, "rows", e.Rows); err != nil {
		return err
	}
	if err := core.Positive(path, "dim", e.Dim); err != nil {
		return err
	}
	if e.Buffer != "" && e.BufferLen <= 0 {
		return units.Errorf(path, "buffer_len must be positive with a buffer (got %d)", e.BufferLen)
	}
	if e.MaxSeq < 0 || e.MaxSeq > e.Rows {
		return units.Errorf(path, "max_seq must be in 0..rows (rows=%d, max_seq=%d)", e.Rows, e.MaxSeq)
	}
	return nil
}

func (e *AddEmbedding) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != e.Dim {
		panic(core.ShapeMismatch(b, "add_embedding", e.Dim, b.Last(x)))
	}
	name := b.ModuleName(e)
	if e.MaxSeq > 0 && b.Seq > e.MaxSeq {
		panic(core.LowerError{Err: &units.Error{
			Path: b.Name(name),
			Msg:  fmt.Sprintf("seq=%d exceeds the %d learned positions of this model", b.Seq, e.MaxSeq),
			Hint: fmt.Sprintf("use seq <= %d (the config's max_position_embeddings)", e.MaxSeq),
		}})
	}
	if e.Buffer != "" {
		b.Buffer(e.Buffer, []int64{1, e.BufferLen}, units.INT64, "the ids' source (a non-persistent int64 buffer)")
	}
	defer b.Scope(name)()
	w := b.Param("weight", []int64{e.Rows, e.Dim}, "pos_embed")
	n := int64(1)
	if e.PerSample {
		n = b.Batch
	}
	var ids []core.Value
	if !e.BufferIDs {
		ii := b.AddOp("arange", "ids", nil)
		ids = append(ids, b.Out(ii, "ids", []int64{n, b.Seq}, units.INT64, "position or token-type ids"))
	}
	i := b.AddOp("embedding", "", ids, w)
	y := b.Out(i, "out", []int64{n, b.Seq, e.Dim}, b.Prec.Params, "learned position or token-type embeddings")
	b.Save(i, ids...)
	b.Op(i).NoGradB = true
	return b.Add("add", x, y)
}
