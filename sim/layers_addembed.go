package sim

import "fmt"

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
}

func (e *AddEmbedding) Kind() string      { return "add_embedding" }
func (e *AddEmbedding) Label() string     { return e.Name }
func (e *AddEmbedding) Children() []Layer { return nil }
func (e *AddEmbedding) Params() int64     { return e.Rows * e.Dim }
func (e *AddEmbedding) InDim() int64      { return e.Dim }
func (e *AddEmbedding) OutDim() int64     { return e.Dim }
func (e *AddEmbedding) Summary() string {
	s := fmt.Sprintf("%d x %d", e.Rows, e.Dim)
	if e.PerSample {
		s += ", per sample"
	}
	return s
}

func (e *AddEmbedding) validate(path string) error {
	if err := positive(path, "rows", e.Rows); err != nil {
		return err
	}
	if err := checkVocab(path, "rows", e.Rows); err != nil { // checked.go
		return err
	}
	if err := positive(path, "dim", e.Dim); err != nil {
		return err
	}
	if e.MaxSeq < 0 || e.MaxSeq > e.Rows {
		return errorf(path, "max_seq must be in 0..rows (rows=%d, max_seq=%d)", e.Rows, e.MaxSeq)
	}
	return nil
}

func (e *AddEmbedding) lower(b *builder, x Value) Value {
	if b.last(x) != e.Dim {
		panic(shapeMismatch(b, "add_embedding", e.Dim, b.last(x)))
	}
	name := e.Name
	if name == "" {
		name = "pos_embed"
	}
	if e.MaxSeq > 0 && b.seq > e.MaxSeq {
		panic(lowerError{&Error{
			Path: b.name(name),
			Msg:  fmt.Sprintf("seq=%d exceeds the %d learned positions of this model", b.seq, e.MaxSeq),
			Hint: fmt.Sprintf("use seq <= %d (the config's max_position_embeddings)", e.MaxSeq),
		}})
	}
	defer b.scope(name)()
	w := b.param("weight", []int64{e.Rows, e.Dim}, "pos_embed")
	n := int64(1)
	if e.PerSample {
		n = b.batch
	}
	ii := b.addOp("arange", "ids", nil)
	ids := b.out(ii, "ids", []int64{n, b.seq}, INT64, "position or token-type ids")
	i := b.addOp("embedding", "", []Value{ids}, w)
	y := b.out(i, "out", []int64{n, b.seq, e.Dim}, b.prec.Params, "learned position or token-type embeddings")
	b.save(i, ids)
	b.op(i).noGradB = true
	return b.add("add", x, y)
}
