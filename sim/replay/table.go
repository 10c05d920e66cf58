package replay

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Table is an embedding or n-gram memory table (DESIGN.md 2.3, SEEDS.md
// story 4): heads tables of rows x dim each, read by hashed row indices
// computed from the batch's token ids.
//
// # What the layer computes
//
// Each token reads reads_per_token rows in all (default: one per head);
// each head reads reads_per_token/heads rows of its own table and sums
// them (one read: the row itself). The heads' results are concatenated:
// the layer's output is [batch, seq, heads*dim], whatever its input. The
// input only places the layer in the model; the rows come from the
// token ids, so the model must start with an embedding. Typical uses:
//
//	residual(table(...))                          x + rows  (width heads*dim)
//	residual(sequential(table(...), linear(heads*dim, d)))  x + projected rows
//
// # Lowering
//
// Before the forward (alongside the batch) the hashed row indices,
// [heads, batch, seq(, reads)] int64, are computed from the token ids.
// The lookup is a gather (F.embedding per head, written into one output);
// it saves the int64 indices, and its gradient is a scatter-add.
//
//   - grad="dense": the table is a parameter; its gradient is table-sized
//     (embedding_dense_backward) and the plan's optimizer (AdamW: two
//     table-sized moments) walks the whole table.
//   - grad="sparse": each head's distinct rows read this step (torch.unique,
//     sorted) are copied into a small leaf tensor [distinct, dim]; the
//     lookup gathers from the leaf by the inverse indices, so only the
//     leaf gets a gradient. The table is stepped by its own row-wise AdamW
//     (SparseAdam-style, bias correction by the table's step count) over
//     those rows only, whatever the plan's optimizer; its two moments are
//     still table-sized and stay resident. pad_rows pads each head's row
//     list to the maximum (positions x reads per head) with a spare row
//     (one extra row per head in the table's storage, not counted as a
//     parameter), so every step has the same tensor sizes.
//   - placement="host" (sparse only): table and moments live in host
//     memory. The host gathers the rows read into a pinned buffer and
//     sends them (H2D) into the leaf before the forward; after the
//     backward the leaf's gradient comes back (D2H) and the host runs the
//     row-wise AdamW. The device holds no table bytes: only the leaf, its
//     gradient and the indices.
type Table struct {
	Name          string
	Rows          int64  // rows per head
	Dim           int64  // features per row
	Heads         int64  // tables (one per head)
	ReadsPerToken int64  // rows read per token over all heads; 0 = Heads
	Grad          string // dense | sparse
	Placement     string // device | host
	PadRows       bool   // pad each step's row lists to the maximum (sparse)
}

func (t *Table) Kind() string           { return "table" }
func (t *Table) Label() string          { return t.Name }
func (t *Table) Children() []core.Layer { return nil }

// Params is rows x heads x dim: the trained rows (the spare padding row is
// storage, not a parameter).
func (t *Table) Params() int64 { return t.Rows * t.Heads * t.Dim }

// OutDim is the output width, heads x dim.
func (t *Table) OutDim() int64 { return t.Heads * t.Dim }

func (t *Table) Summary() string {
	s := fmt.Sprintf("%d heads x %d rows x %d, %s, %s", t.Heads, t.Rows, t.Dim, t.grad(), t.placement())
	if r := t.reads(); r != t.Heads {
		s += fmt.Sprintf(", %d reads/token", r)
	}
	if t.grad() == "sparse" && !t.PadRows {
		s += ", unpadded"
	}
	return s
}

func (t *Table) grad() string {
	if t.Grad == "" {
		return "dense"
	}
	return t.Grad
}

func (t *Table) placement() string {
	if t.Placement == "" {
		return "device"
	}
	return t.Placement
}

func (t *Table) reads() int64 {
	if t.ReadsPerToken == 0 {
		return t.Heads
	}
	return t.ReadsPerToken
}

// readsPerHead is the rows each head reads per token.
func (t *Table) readsPerHead() int64 { return t.reads() / t.Heads }

// spare is the padding rows per head in storage (sparse with pad_rows).
func (t *Table) spare() int64 {
	if t.grad() == "sparse" && t.PadRows {
		return 1
	}
	return 0
}

// maxTableBytesPerParam bounds the table so that its storage, moments and
// dense gradient (at most 8-byte elements each) stay within int64.
const maxTableBytesPerParam = 32

// maxTableHeads bounds a table's heads: each lowers to its own tensors,
// so 2^40 heads would allocate per head before any size is checked.
const maxTableHeads = 1 << 16

func (t *Table) Validate(path string) error {
	for _, f := range []struct {
		what string
		n    int64
	}{{"rows", t.Rows}, {"dim", t.Dim}, {"heads", t.Heads}} {
		if err := core.Positive(path, f.what, f.n); err != nil {
			return err
		}
	}
	if t.Heads > maxTableHeads {
		return &units.Error{Path: path, Msg: fmt.Sprintf("heads must be at most %d (got %d)", maxTableHeads, t.Heads),
			Hint: "each head is a table of its own, lowered to its own tensors; memory layers use tens of heads"}
	}
	if t.ReadsPerToken < 0 {
		return units.Errorf(path, "reads_per_token must be positive (got %d)", t.ReadsPerToken)
	}
	if r := t.reads(); r%t.Heads != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("reads_per_token must be a multiple of heads (got %d reads for %d heads)", r, t.Heads),
			Hint: "each head reads the same number of rows per token; the default is one per head"}
	}
	switch t.grad() {
	case "dense", "sparse":
	default:
		return units.Errorf(path, "unknown grad %q (known: dense, sparse)", t.Grad)
	}
	switch t.placement() {
	case "device":
	case "host":
		if t.grad() != "sparse" {
			return &units.Error{Path: path, Msg: `placement="host" needs grad="sparse"`,
				Hint: "a dense gradient is table-sized: it would cross PCIe whole every step; host tables ship only the rows read"}
		}
	default:
		return units.Errorf(path, "unknown placement %q (known: device, host)", t.Placement)
	}
	n, ok := mulChecked(t.Rows+1, t.Heads, t.Dim, maxTableBytesPerParam)
	if !ok || n <= 0 {
		return units.Errorf(path, "table too large: %d rows x %d heads x %d dim overflows a byte count", t.Rows, t.Heads, t.Dim)
	}
	return nil
}

// mulChecked multiplies positive factors, reporting overflow.
func mulChecked(fs ...int64) (int64, bool) {
	p := int64(1)
	for _, f := range fs {
		if f <= 0 {
			return 0, false
		}
		if p > math.MaxInt64/f {
			return 0, false
		}
		p *= f
	}
	return p, true
}

// tableProg is one table layer as lowered into a program: the values the
// replay creates before the forward (table_replay.go) and what the
// table's optimizer step needs.
type tableProg struct {
	t         *Table
	name      string     // module path of the layer
	positions int64      // tokens in the micro-batch (batch x seq)
	idx       core.Value // hashed row indices, [heads, batch, seq(, reads)] int64
	params    []int32    // per head: the table as a program parameter (on the device), else nil
	heads     []tableHead
	leafRows  int64 // rows in each head's leaf this step (distinct, or padded)
	train     bool  // the table is trained this step (not eval, not frozen by LoRA)
}

// tableHead is one head's per-step tensors of a sparse table.
type tableHead struct {
	rows    core.Value // torch.unique output: the distinct rows (storage of n int64, see table_replay.go)
	inverse core.Value // position -> leaf row, [batch, seq(, reads)] int64
	leaf    core.Value // the rows read, [leafRows, dim]
}

// indicesPerHead is n, the row indices each head reads per step.
func (tp *tableProg) indicesPerHead() int64 { return tp.positions * tp.t.readsPerHead() }

// maxLeafRows is the most distinct rows a head can read in a step: its
// indices, or the whole table when that is smaller. pad_rows pads to it.
func (tp *tableProg) maxLeafRows() int64 { return min(tp.indicesPerHead(), tp.t.Rows) }

func (t *Table) Lower(b *core.Builder, x core.Value) core.Value {
	in := b.P.Input
	if in == core.NoValue || b.Dtype(in) != units.INT64 {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(t.Name), Msg: "table reads the batch's token ids, but the model's input is not tokens",
			Hint: "start the model with embedding(vocab, dim) and place the table after it, e.g. residual(table(...))"}})
	}
	if b.Par.Tpn() > 1 || b.Par.Cpn() > 1 {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(t.Name), Msg: fmt.Sprintf("tables are not modelled under tensor or context parallelism yet (tp=%d, cp=%d)", b.Par.Tpn(), b.Par.Cpn()),
			Hint: "simulate the table with tp=1 and cp=1 (data parallelism replicates it)"}})
	}
	name := b.ModuleName(t)
	defer b.Scope(name)()
	r := t.readsPerHead()
	tokShape := append([]int64(nil), b.Shape(in)...) // [batch, seq]
	perHead := tokShape
	if r > 1 {
		perHead = append(append([]int64(nil), tokShape...), r)
	}
	// LoRA freezes every base weight, tables included.
	tp := &tableProg{t: t, name: b.Name(""), positions: core.Numel(tokShape), train: !b.Eval && b.Lora == nil}
	tp.leafRows = tp.maxLeafRows()
	tp.idx = tableInput(b, "indices", append([]int64{t.Heads}, perHead...), units.INT64, false,
		"hashed row indices of every head, computed from the token ids with the batch")
	dt := b.Prec.Params
	outShape := append(append([]int64(nil), tokShape...), t.Heads*t.Dim)
	// Sparse tables gather into leaves when training, and host tables
	// always (their rows must cross to the device); a device table in eval
	// (or frozen) is read directly.
	leaves := t.grad() == "sparse" && (tp.train || t.placement() == "host")
	if t.placement() == "device" {
		for h := int64(0); h < t.Heads; h++ {
			done := b.Scope(core.Itoa(h))
			pi := b.Param("weight", []int64{t.Rows + t.spare(), t.Dim}, "table")
			if t.grad() == "sparse" {
				// Stepped by the table's own row-wise AdamW, not the plan's optimizer.
				b.P.Params[pi].Trainable = false
			}
			tp.params = append(tp.params, pi)
			done()
		}
	}
	var i int32
	if leaves {
		ins := make([]core.Value, 0, 2*t.Heads)
		for h := int64(0); h < t.Heads; h++ {
			done := b.Scope(core.Itoa(h))
			hd := tableHead{
				rows:    tableInput(b, "rows", []int64{tp.indicesPerHead()}, units.INT64, false, "distinct rows read by this head (torch.unique output; storage keeps all indices)"),
				inverse: tableInput(b, "inverse", perHead, units.INT64, false, "leaf row of each read (torch.unique inverse indices)"),
				leaf:    tableInput(b, "leaf", []int64{tp.leafRows, t.Dim}, dt, tp.train, leafWhy(t)),
			}
			tp.heads = append(tp.heads, hd)
			ins = append(ins, hd.inverse)
			done()
		}
		for _, hd := range tp.heads {
			ins = append(ins, hd.leaf)
		}
		i = b.AddOp("table_lookup", "lookup", ins)
		for _, hd := range tp.heads {
			b.Op(i).Bytes += float64(b.Val(hd.inverse).Bytes)
		}
	} else {
		i = b.AddOp("table_lookup", "lookup", []core.Value{tp.idx}, tp.params...)
		b.Op(i).NoGradB = true // int64 indices get no gradient
		b.Op(i).Bytes += float64(b.Val(tp.idx).Bytes)
	}
	y := b.Out(i, "out", outShape, dt, fmt.Sprintf("rows read from table %s (%d heads x %d)", tp.name, t.Heads, t.Dim))
	if leaves {
		for _, hd := range tp.heads {
			b.Save(i, hd.inverse)
		}
	} else {
		b.Save(i, tp.idx)
	}
	reads := tp.positions * t.reads()
	b.Op(i).Bytes += float64(dt.Bytes(reads * t.Dim)) // the rows gathered
	if r > 1 {
		b.Op(i).Flops = float64(reads * t.Dim) // summing each head's reads
	}
	b.Op(i).WorkB = embeddingBackwardWorkspace(tp.indicesPerHead(), t.Dim)
	b.P.Tables = append(b.P.Tables, tp)
	return y
}

func leafWhy(t *Table) string {
	if t.placement() == "host" {
		return "rows read this step, sent from host memory (leaf tensor: only it gets a gradient)"
	}
	return "rows read this step, copied from the table (leaf tensor: only it gets a gradient)"
}

// tableInput adds a value that exists before the forward (produced by the
// replay's table setup, table_replay.go), like the batch.
func tableInput(b *core.Builder, name string, shape []int64, dt units.DType, grad bool, why string) core.Value {
	b.P.Values = append(b.P.Values, core.ValueInfo{
		Name: b.Name(name), Shape: shape, Dtype: dt, Bytes: dt.Bytes(core.Numel(shape)),
		Grad: grad && !b.Eval, Cat: core.CatActivations, Producer: -1, Why: why,
	})
	return core.Value(len(b.P.Values) - 1)
}

// embeddingBackwardWorkspace is the transient memory of one head's lookup
// backward over n indices of rows dim wide. PyTorch's CUDA embedding
// backward (aten/src/ATen/native/cuda/Embedding.cu,
// embedding_dense_backward_cuda) scatters with atomics and no workspace for
// n <= 3072; above, it sorts the indices (sorted_indices, orig_indices:
// int64 each) and embedding_backward_cuda_kernel
// (EmbeddingBackwardKernel.cu) adds segment_offsets, partials_per_segment,
// partials_per_segment_offset and partial_segment_offset (int64 each) and
// grad_weight_per_segment, [n, dim] in the fp32 accumulation type. Heads
// run one after another, so one head's workspace is live at a time. The
// gradient itself (grad_weight) is the parameter's, or the leaf's.
func embeddingBackwardWorkspace(n, dim int64) int64 {
	if n <= 3072 {
		return 0
	}
	return 6*units.INT64.Bytes(n) + units.FP32.Bytes(n*dim)
}

// TableName names the table in a program (TableProgram).
func (tp *tableProg) TableName() string { return tp.name }

// tablesOf is the program's table layers.
func tablesOf(p *core.Program) []*tableProg {
	out := make([]*tableProg, len(p.Tables))
	for i, t := range p.Tables {
		out[i] = t.(*tableProg)
	}
	return out
}
