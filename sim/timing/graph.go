package timing

import (
	"github.com/memsh/memsh/sim/core"
)

// Gathers and scatters, priced from their access pattern rather than as
// streams of their output bytes.
//
//   - A row gather (index_select over edges, PyG's collect of x_i and x_j;
//     an embedding lookup; MoE's dispatch copy) reads one index per row
//     and a whole row from a random place: DRAM serves it in 32-byte
//     sectors (CUDA C++ Best Practices Guide, "Coalesced Access to Global
//     Memory"), so a row costs its bytes rounded up to whole sectors, and
//     writes the gathered rows contiguously. Its backward is an index_add
//     of the gradient rows into a zeroed tensor of the source's shape.
//   - A scatter-add (PyG's sum aggregation: src.new_zeros(size).
//     scatter_add_(dim, index.expand_as(src), src); ATen's index_add_;
//     MoE's combine) zeroes its output, reads the index and the source,
//     and adds every element into the output with an atomic
//     read-modify-write (gpuAtomicAddNoReturn in ATen's
//     ScatterGatherKernel.cu and Indexing.cu): the output's sectors are
//     read and written once per contribution, not once in all. Its
//     backward gathers the gradient at the index (a row gather).
//
// The bytes then stream at the copy bandwidth. Atomic contention (many
// edges into one node at once) is not priced: the knn and multi-scale
// graphs of the anemoi models give each node a handful of edges.

// sectorBytes is the DRAM access granularity of NVIDIA GPUs.
const sectorBytes = 32

// indexBytes is an int64 index.
const indexBytes = 8

// rowRead is the DRAM bytes of reading one random row of b bytes.
func rowRead(b float64) float64 {
	return ceilDiv(b, sectorBytes) * sectorBytes
}

// graphOp prices the gathers and scatters; ok is false for other ops.
func (pr *pricer) graphOp(op *core.OpInfo) (OpCost, bool) {
	switch op.Kind {
	case "index_select", "gather", "index", "embedding", "table_lookup":
		return pr.gather(op), true
	case "scatter_add", "index_add":
		return pr.scatter(op), true
	}
	return OpCost{}, false
}

// gather prices a row gather: out rows, each read from a random place.
func (pr *pricer) gather(op *core.OpInfo) OpCost {
	if len(op.Out) == 0 {
		return OpCost{}
	}
	p := pr.prog
	out := &p.Values[op.Out[0]]
	if len(out.Shape) == 0 || out.Bytes == 0 {
		return OpCost{}
	}
	rows := float64(core.Rows(out.Shape))
	row := float64(out.Bytes) / rows
	fwd := rows*(indexBytes+rowRead(row)) + float64(out.Bytes)
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: fwd}
	c.Fwd, c.Bound = streamTime(pr.d, fwd)
	if in, w := pr.needsGrad(op); in || w {
		// index_add of the gradient rows into a zeroed source-sized tensor
		var src float64
		if len(op.In) > 0 && p.Values[op.In[0]].Grad {
			src = float64(p.Values[op.In[0]].Bytes)
		}
		for _, q := range op.Params {
			src += float64(p.Params[q].Numel) * elemBytes(out.Dtype)
		}
		bwd := src + rows*(indexBytes+row+2*rowRead(row))
		c.Bwd, _ = streamTime(pr.d, bwd)
		c.BwdK = 2 // zero fill, index_add
	}
	return c
}

// scatter prices a scatter-add of the source's rows into a zeroed output.
func (pr *pricer) scatter(op *core.OpInfo) OpCost {
	if len(op.In) == 0 || len(op.Out) == 0 {
		return OpCost{}
	}
	p := pr.prog
	src := &p.Values[op.In[0]]
	out := &p.Values[op.Out[0]]
	if len(src.Shape) == 0 || src.Bytes == 0 {
		return OpCost{}
	}
	rows := float64(core.Rows(src.Shape))
	row := float64(src.Bytes) / rows
	fwd := float64(out.Bytes) + rows*(indexBytes+row+2*rowRead(row))
	c := OpCost{FwdK: 2, Flops: op.Flops, Bytes: fwd} // zero fill, scatter
	c.Fwd, c.Bound = streamTime(pr.d, fwd)
	if in, _ := pr.needsGrad(op); in {
		bwd := rows * (indexBytes + rowRead(row) + row)
		c.Bwd, _ = streamTime(pr.d, bwd)
		c.BwdK = 1
	}
	return c
}
