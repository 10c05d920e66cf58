package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Attention backends of the graph-transformer blocks (anemoi's
// graph_attention_backend).
const (
	BackendPyG    = "pyg"    // PyG's message passing (conv.go)
	BackendTriton = "triton" // anemoi's fused Triton kernel (this file)
)

// DefaultBackend is the graph_attention_backend a release uses when the
// config leaves it out: "triton" from anemoi-models 0.11.0 (anemoi-core
// PR #631, b40b6c610, the default of GraphTransformerBaseBlock and of
// anemoi-training's graphtransformer configs), PyG before.
func (v Version) DefaultBackend() string {
	if v.Minor >= 11 {
		return BackendTriton
	}
	return BackendPyG
}

// resolveBackend is the backend a block of release v runs: its
// attention_backend, else the release's default.
func resolveBackend(backend string, v Version) string {
	if backend == "" {
		return v.DefaultBackend()
	}
	return backend
}

// checkBackendName refuses an unknown attention_backend.
func checkBackendName(path, backend string) error {
	switch backend {
	case "", BackendPyG, BackendTriton:
		return nil
	}
	return &units.Error{Path: path, Msg: fmt.Sprintf("unknown attention_backend %q (known: pyg, triton)", backend)}
}

// checkBackendRelease refuses the Triton kernel in a release before it.
func checkBackendRelease(path, backend string, v Version) error {
	if backend == BackendTriton && v.Minor < 11 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("attention_backend=\"triton\" needs anemoi-models 0.11.0 or later (the model replays %s)", v),
			Hint: "anemoi=\"0.11.0\" or later, or attention_backend=\"pyg\""}
	}
	return nil
}

// tritonConv lowers the Triton GraphTransformer (models/triton/gt.py,
// anemoi-core PR #631) for one chunk of ne edges into r destination rows:
//
//   - edge_index_to_csc (triton/utils.py) per call: colptr over the
//     destination rows, rowptr over the sources, edge_id_per_src
//     (argsort of the source of each edge); row and edge_dst are views of
//     the edge index (edges come sorted by destination, so no permutation
//     and no copy of the edge features); index_sort's sorted copy of the
//     sources and its permutation are freed when it returns;
//   - one kernel that never materialises a per-edge tensor: an online
//     softmax per destination node writes an fp32 output and its
//     log-sum-exp, and returns the output cast to the query's dtype;
//   - saved for backward: query, key, value and edge features (the
//     kernel's inputs), the fp32 output, the log-sum-exp and the index
//     tensors; the backward's two passes allocate dQ, dK, dV, dE (the
//     input gradients) and D, an fp32 [r, heads] tensor.
func (g edgeAttention) tritonConv(b *core.Builder, name string, q, key, val, attr, idx core.Value, r, ne int64) core.Value {
	defer b.Scope(name)()
	if g.wrapped {
		defer b.BeginNestedRegion("")()
	}
	c, h := g.channels, g.heads
	src := core.Rows(b.Shape(key))
	i := b.AddOp("index", "edge_index_to_csc", []core.Value{idx})
	colptr := b.Out(i, "colptr", []int64{r + 1}, units.INT64, "CSC column pointers over the destination rows (index2ptr)")
	rowptr := b.Out(i, "rowptr", []int64{src + 1}, units.INT64, "CSR row pointers over the source rows (index2ptr of the sorted sources)")
	ids := b.Out(i, "edge_id_per_src", []int64{ne}, units.INT64, "argsort of each edge's source (CSR order to CSC order)")
	for _, v := range []core.Value{colptr, rowptr, ids} {
		b.Val(v).Grad = false
	}
	b.Op(i).WorkF = 2 * units.INT64.Bytes(ne) // index_sort's sorted sources and permutation
	b.Op(i).Bytes = float64(4 * units.INT64.Bytes(ne))

	k := b.AddOp("graph_attention", "graph_transformer_attention", []core.Value{q, key, val, attr, idx, colptr, rowptr, ids})
	dt := b.Dtype(q)
	saved := b.Out(k, "out_saved", []int64{r, c}, units.FP32, "fp32 attention output kept for backward (the kernel's accumulator)")
	lse := b.Out(k, "lse", []int64{r, h}, units.FP32, "fp32 log-sum-exp per destination row and head, kept for backward")
	out := b.Out(k, "out", []int64{r, c}, dt, fmt.Sprintf("attention output cast to the query's %s (out_saved.to(q.dtype))", dt))
	b.Val(saved).Grad, b.Val(lse).Grad = false, false
	b.Save(k, q, key, val, attr, saved, lse, idx, colptr, rowptr, ids)
	b.Op(k).WorkB = units.FP32.Bytes(r * h) // D of the destination pass
	// q.(k+e) and a*(v+e) per edge and channel, the softmax per edge and head.
	b.Op(k).Flops = float64(4*ne*c + 4*ne*h)
	// Each edge reads its source's key and value rows and its own edge
	// features; each destination row reads its query, writes the fp32
	// output, the cast and the log-sum-exp.
	b.Op(k).Bytes = float64(dt.Bytes(3*ne*c) + units.INT64.Bytes(ne) + dt.Bytes(2*r*c) + units.FP32.Bytes(r*c+r*h))
	return out
}
