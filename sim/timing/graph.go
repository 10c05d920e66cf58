package timing

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
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
//   - anemoi's fused Triton GraphTransformer (models/triton/gt.py at
//     b40b6c610, anemoi-core PR #631) reads per edge its edge features
//     and the key and value rows of its source; its backward's
//     destination pass reads them again with the destination rows' query,
//     output and output gradient, and its source pass reads per edge the
//     query and output-gradient rows of the destination and the edge
//     features and writes the edge-feature gradient (gtAttention).
//
// Rows read at random from a table are served from L2 when they are
// there (atomics are resolved in L2 too). The L2 is split in two
// partitions, each caching the data of the SMs wired to it (NVIDIA A100
// and H100 whitepapers, "L2 cache"), so a table read by all SMs has half
// the L2 to itself; with rows read uniformly at random a row is resident
// with probability (L2 / 2) / table (dramReads). The bytes then stream at
// the copy bandwidth. Atomic contention (many edges into one node at once)
// is not priced: PR #631's rows (sim/graph conv_time_test.go) show the
// same shortfall whether a node takes 3 or 21 edges.

// Up to torch 2.7, index_select copied fp16 and bf16 rows one 2-byte
// element per thread; pytorch#152380 (torch 2.8) copies 8 bytes at a
// time, with "a 2.5x improvement in memory bandwidth" on an A100 80GB
// (rows of a multiple of 4 elements, its description). memsh prices the
// vectorised copy at the copy bandwidth, so on runtimes before it
// (core.Runtime.ScalarIndexSelect: cuda-2.6 and older) an eager fp16 or
// bf16 index_select streams its bytes at 1 / 2.5 of it. Compiled plans
// are left alone: Inductor generates its own gather. The backward
// (index_add_) is another kernel, not priced apart.
const scalarIndexSelectSlowdown = 2.5

// sectorBytes is the DRAM access granularity of NVIDIA GPUs.
const sectorBytes = 32

// indexBytes is an int64 index.
const indexBytes = 8

// rowRead is the DRAM bytes of reading one random row of b bytes.
func rowRead(b float64) float64 {
	return ceilDiv(b, sectorBytes) * sectorBytes
}

// dramReads is the DRAM bytes of reads bytes of rows read at random from
// a table of table bytes: every row once at least, and the reads that miss
// half the L2 (one partition's share) with the rest.
func (pr *pricer) dramReads(reads, table float64) float64 {
	l2 := float64(pr.d.RatesRef().L2) / 2
	if l2 <= 0 || table <= 0 {
		return reads
	}
	once := min(reads, table)
	if table <= l2 {
		return once
	}
	return max(once, reads*(1-l2/table))
}

// graphOp prices the gathers and scatters; ok is false for other ops.
func (pr *pricer) graphOp(op *core.OpInfo) (OpCost, bool) {
	switch op.Kind {
	case "index_select", "gather", "index", "embedding", "table_lookup":
		return pr.gather(op), true
	case "scatter_add", "index_add":
		return pr.scatter(op), true
	case "graph_attention":
		return pr.gtAttention(op), true
	case "mul":
		if c, ok := pr.broadcastMul(op); ok {
			return c, true
		}
		return pr.rowBroadcastMul(op) // row_broadcast.go
	case "sum":
		return pr.headSum(op)
	}
	return OpCost{}, false
}

// table is the bytes of the tensor a gather reads its rows from: its
// input, or its weights (an embedding) in the output's dtype.
func (pr *pricer) table(op *core.OpInfo, out *core.ValueInfo) float64 {
	p := pr.prog
	var t float64
	for _, q := range op.Params {
		t += float64(p.Params[q].Numel) * elemBytes(out.Dtype)
	}
	if t == 0 && len(op.In) > 0 {
		t = float64(p.Values[op.In[0]].Bytes)
	}
	return t
}

// gather prices a row gather: out rows, each read from a random place.
// The rows are the op's largest output: an op may also make its index
// (grouped_mm's restore_order makes inv_perm, then the rows,
// nn/moe_hf.go).
func (pr *pricer) gather(op *core.OpInfo) OpCost {
	if len(op.Out) == 0 {
		return OpCost{}
	}
	p := pr.prog
	out := &p.Values[op.Out[0]]
	for _, v := range op.Out[1:] {
		if p.Values[v].Bytes > out.Bytes {
			out = &p.Values[v]
		}
	}
	if len(out.Shape) == 0 || out.Bytes == 0 {
		return OpCost{}
	}
	rows := float64(core.Rows(out.Shape))
	row := float64(out.Bytes) / rows
	table := pr.table(op, out)
	fwd := rows*indexBytes + pr.dramReads(rows*rowRead(row), table) + float64(out.Bytes)
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: fwd}
	c.Fwd, c.Bound = streamTime(&pr.d, fwd)
	g, measured := pr.graphRates()
	measured = measured && op.Kind == "index_select"
	if measured {
		c.Fwd, c.Bound = kernelTime(0, pr.gatherTime(g, rows, row, table, op.SortedIndex))
	}
	if op.Kind == "index_select" && pr.scalarIndexSelect && pr.dispatch == DispatchEager && elemBytes(out.Dtype) == 2 {
		c.Fwd *= scalarIndexSelectSlowdown
	}
	if in, w := pr.needsGrad(op); in || w {
		// index_add of the gradient rows into a zeroed source-sized tensor
		var src float64
		if len(op.In) > 0 && p.Values[op.In[0]].Grad {
			src = float64(p.Values[op.In[0]].Bytes)
		}
		for _, q := range op.Params {
			src += float64(p.Params[q].Numel) * elemBytes(out.Dtype)
		}
		adds := rows*(indexBytes+row) + 2*pr.dramReads(rows*rowRead(row), table)
		c.Bwd, _ = streamTime(&pr.d, src+adds)
		c.BwdK = 2 // zero fill, index_add
		n := rows * row / elemBytes(out.Dtype)
		if t, ok := pr.atomicAddTime(indexAddRates(g, max(n, table/elemBytes(out.Dtype))), n, out.Dtype, src, adds); measured && ok {
			c.Bwd, _ = kernelTime(0, t)
		}
		if t, ok := pr.indexPutTime(g, op, n, out.Dtype, src); ok {
			c.Bwd, _ = kernelTime(0, t)
		}
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
	adds := rows*(indexBytes+row) + 2*pr.dramReads(rows*rowRead(row), float64(out.Bytes))
	fwd := float64(out.Bytes) + adds
	c := OpCost{FwdK: 2, Flops: op.Flops, Bytes: fwd} // zero fill, scatter
	c.Fwd, c.Bound = streamTime(&pr.d, fwd)
	g, measured := pr.graphRates()
	measured = measured && op.Kind == "scatter_add"
	// PyG's index (the destination's) is sorted: the read-modify-writes of
	// a row follow one another in L2, which writes the row back once.
	sorted := rows*(indexBytes+row) + float64(out.Bytes)
	if t, ok := pr.atomicAddTime(g.ScatterAdd, rows*row/elemBytes(src.Dtype), src.Dtype, float64(out.Bytes), sorted); measured && ok {
		c.Fwd, c.Bound = kernelTime(0, t)
	}
	if in, _ := pr.needsGrad(op); in {
		bwd := rows*(indexBytes+row) + pr.dramReads(rows*rowRead(row), float64(out.Bytes))
		c.Bwd, _ = streamTime(&pr.d, bwd)
		c.BwdK = 1
		if measured {
			// a gather at the destination index: sorted
			c.Bwd, _ = kernelTime(0, pr.gatherTime(g, rows, row, float64(out.Bytes), true))
		}
	}
	return c
}

// gtAttention prices the Triton GraphTransformer kernel (gt.py at
// b40b6c610) from its operands: query [r, c], key and value [s, c], edge
// features [e, c], the edge index; outputs the fp32 output, the
// log-sum-exp and the output in the query's dtype.
//
//   - forward, a program per destination row: the query row, per edge
//     the edge features (in CSC order) and the key and value rows of its
//     source (gathered), the outputs;
//   - backward, destination pass: the query, output and output-gradient
//     rows, per edge the edge features and the gathered key and value
//     rows; it writes dQ and D ([r, heads]);
//   - backward, source pass, a program per source row: its key and value
//     rows, per edge the gathered query and output-gradient rows of the
//     destination and the edge features (by edge id), and it writes the
//     edge-feature gradient per edge and dK, dV per source row.
func (pr *pricer) gtAttention(op *core.OpInfo) OpCost {
	fwd, bwd, ok := pr.gtBytes(op)
	if !ok {
		return pr.stream(op, op.Bytes)
	}
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: fwd}
	c.Fwd, c.Bound = streamTime(&pr.d, fwd)
	if in, _ := pr.needsGrad(op); in {
		c.Bwd, _ = streamTime(&pr.d, bwd)
		c.BwdK = 2
	}
	return c
}

// gtBytes is the DRAM bytes of the kernel's forward and backward (both
// passes); ok is false for an op without the kernel's operands.
func (pr *pricer) gtBytes(op *core.OpInfo) (fwd, bwd float64, ok bool) {
	if len(op.In) < 5 || len(op.Out) < 3 {
		return 0, 0, false
	}
	p := pr.prog
	v := func(x core.Value) float64 { return float64(p.Values[x].Bytes) }
	q, k, val, e := op.In[0], op.In[1], op.In[2], op.In[3]
	edges := float64(core.Rows(p.Values[e].Shape))
	if edges == 0 {
		return 0, 0, false
	}
	row := v(e) / edges // one edge's features: a key, value or query row as wide
	idx := edges * indexBytes
	var outs float64
	for _, o := range op.Out {
		outs += v(o)
	}
	kv := pr.dramReads(2*edges*rowRead(row), v(k)+v(val))
	fwd = v(q) + v(e) + kv + idx + outs
	saved, lse := v(op.Out[0]), v(op.Out[1])
	dst := 3*v(q) + saved + lse + v(e) + kv + idx      // q, dQ, d_out, out, D
	qd := pr.dramReads(2*edges*rowRead(row), 2*v(q))   // the destination's q and d_out per edge
	src := 2*(v(k)+v(val)) + qd + 2*v(e) + 2*idx + lse // k, v, dK, dV; e and dE; m and D per edge
	return fwd, dst + src, true
}

// indexPutTime is the backward of advanced indexing (x[index], op kind
// "index") in eager dispatch on a GPU whose index_put_ was measured
// (hw.GraphKernels.IndexPut), n gradient elements of dt into a zeroed
// source of src bytes: IndexBackward0 is
// index_put_(zeros, indices, grad, accumulate=True)
// (tools/autograd/derivatives.yaml, index_backward), which CUDA runs as
// index_put_with_sort_kernel (aten/src/ATen/native/cuda/Indexing.cu): the
// indices sorted (a cub radix sort, not priced: a few small kernels), then
// indexing_backward_kernel adding each index's gradient rows into its
// row, at IndexPut elements a second; the zero fill at the copy rate.
// index_select's backward is index_add_ instead (atomicAddTime). ok is
// false elsewhere, and for elements other than 2-byte (unmeasured).
func (pr *pricer) indexPutTime(g *hw.GraphKernels, op *core.OpInfo, n float64, dt units.DType, src float64) (float64, bool) {
	if op.Kind != "index" || pr.dispatch != DispatchEager || g.IndexPut <= 0 || width(dt) != 0 {
		return 0, false
	}
	if _, ok := pr.graphRates(); !ok {
		return 0, false
	}
	return src/streamRate(&pr.d) + n/g.IndexPut, true
}
