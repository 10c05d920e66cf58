package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/replay"
	"go.starlark.net/starlark"
)

// Tables (DESIGN.md 2.3): the table() layer, the per-table figures of a
// report (r.tables) and table_steps(), which replays several steps through
// one allocator (SEEDS.md story 4's allocator lesson).

func TableBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "table",
			Sig:  "table(name, rows, dim, heads=1, reads_per_token=None, grad=\"dense\", placement=\"device\", pad_rows=True)",
			Doc: "An embedding or n-gram memory table: heads tables of rows x dim (rows is per head; params = rows * heads * dim), " +
				"read by hashed row indices computed from the batch's token ids. Each token reads reads_per_token rows " +
				"(default one per head; a multiple of heads, summed per head); the output is the heads' rows concatenated, " +
				"[batch, seq, heads * dim], so residual(table(...)) adds them to a residual stream of that width. " +
				"The model must start with an embedding.\n\n" +
				"grad=\"dense\": the table is a parameter with a table-sized gradient, stepped by the plan's optimizer " +
				"(AdamW: 12 bytes/param with the moments, and it reads and writes the whole table every step). " +
				"grad=\"sparse\": each step the distinct rows read are copied into a small leaf tensor that alone gets a " +
				"gradient, and a row-wise AdamW (SparseAdam-style) updates only those rows; the moments stay table-sized. " +
				"pad_rows pads each head's row list to the maximum (positions x reads per head) with a spare row so every " +
				"step has the same tensor sizes (see table_steps). placement=\"host\" (sparse only) keeps table and moments " +
				"in host memory: rows are sent over PCIe before the forward and gradients return after the backward " +
				"(r.traffic[\"pcie\"] is the bytes each way; r.tables has the transfer and host access times).",
			Fn: tableFn,
		},
	}
}

func tableFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var rows, dim, heads, reads starlark.Value
	grad, placement := "dense", "device"
	pad := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "rows", &rows, "dim", &dim,
		"heads?", &heads, "reads_per_token?", &reads, "grad?", &grad, "placement?", &placement, "pad_rows?", &pad); err != nil {
		return nil, err
	}
	if name == "" {
		return nil, fmt.Errorf("table name must not be empty")
	}
	t := &replay.Table{Name: name, Grad: grad, Placement: placement, PadRows: pad}
	if err := ints(intArg{rows, "rows", &t.Rows}, intArg{dim, "dim", &t.Dim}); err != nil {
		return nil, err
	}
	var err error
	if t.Heads, err = OptInt(heads, "heads", 1); err != nil {
		return nil, err
	}
	if t.ReadsPerToken, err = OptInt(reads, "reads_per_token", 0); err != nil {
		return nil, err
	}
	if reads != nil && reads != starlark.None && t.ReadsPerToken <= 0 {
		return nil, fmt.Errorf("reads_per_token must be positive (got %d)", t.ReadsPerToken)
	}
	return newLayer(thread, t)
}
