package replay

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// CUDA graphs (torch.compile(mode="reduce-overhead"), core/cudagraphs.go):
// the CUDA graph trees' private pool is a pool of its own in the caching
// allocator, so the replay gives it a stream of its own (StreamGraphPool):
// every allocation an op of a compiled graph makes, in the forward, its
// recompute and the backward (the gradients it computes, the parameters'
// gradients, workspaces), comes from that pool, and what it frees goes
// back to it, never to the compute stream's pools. Each graph's inputs
// that are neither parameters nor made by an earlier graph (the first
// block's input, the loss graph's logits; in the backward, a gradient an
// eager op made) are copied into placeholders in the pool while the
// graph runs (cudagraph_trees.py, CUDAGraphNode: "we allocate non-static
// inputs within the same memory pool as the CUDAGraph ... On subsequent
// executions, input values will be copied over to these tensors").
//
// cuBLAS's workspaces: cudagraph_trees.py clears PyTorch's cached cuBLAS
// workspaces before and after recording each graph (clear_cublas_manager:
// "If a workspace is required it will be allocated to the cudagraph
// private pool"), so a graph that runs a matmul takes a cuBLAS workspace
// (and a cuBLASLt one when it runs on cuBLASLt) in the pool while it runs;
// the eager ops' workspaces stay in the compute stream's pools.
//
// Simplified: a placeholder lives from the graph's first op to its last;
// a graph that saves its input for the backward keeps the placeholder in
// PyTorch, the eager original here (the same bytes, in the other pool).

// graphPool is the replay's view of the compiled graphs under CUDA graphs.
type graphPool struct {
	of      []int32        // by op: 1 + the index of its compiled graph, 0 outside any
	inputs  [][]core.Value // by graph: values its ops read that are neither parameters nor made by a graph
	outputs [][]core.Value // by graph: values its ops make that an op outside every graph reads
	blas    []graphBlas    // by graph: the workspaces it takes
	copies  []int32        // live placeholders and workspaces of the graph running now
}

// graphBlas is what a graph's matmuls take from cuBLAS: its workspace
// whenever the graph runs a matmul, cuBLASLt's when one runs on it (in
// the forward: a Linear's bias epilogue or _scaled_mm; in the backward:
// _scaled_mm).
type graphBlas struct{ matmul, ltForward, ltBackward bool }

// newGraphPool is nil unless the plan replays its compiled graphs as CUDA
// graphs.
func newGraphPool(p *core.Program, plan *core.Plan) *graphPool {
	if !plan.Compile.CUDAGraphs() || len(p.Graphs) == 0 {
		return nil
	}
	g := &graphPool{of: make([]int32, len(p.Ops)), inputs: make([][]core.Value, len(p.Graphs)), outputs: make([][]core.Value, len(p.Graphs)),
		blas: make([]graphBlas, len(p.Graphs))}
	for k, gr := range p.Graphs {
		for j := gr.First; j < gr.End; j++ {
			g.of[j] = int32(k + 1)
			op := &p.Ops[j]
			g.blas[k].matmul = g.blas[k].matmul || op.Kind == "matmul"
			g.blas[k].ltForward = g.blas[k].ltForward || p.CublasLt(op)
			g.blas[k].ltBackward = g.blas[k].ltBackward || op.ScaledMM
		}
	}
	seenIn := map[core.Value]int{}
	seenOut := map[core.Value]bool{}
	for j := range p.Ops {
		op := &p.Ops[j]
		for _, v := range op.In {
			vi := &p.Values[v]
			pr := vi.Producer
			if k := g.of[j]; k != 0 && (pr < 0 || g.of[pr] == 0) && vi.Cat != core.CatParams && !vi.Fused {
				if seenIn[v] != int(k) {
					seenIn[v] = int(k)
					g.inputs[k-1] = append(g.inputs[k-1], v)
				}
			}
			if g.of[j] == 0 && pr >= 0 && g.of[pr] != 0 && !seenOut[v] {
				seenOut[v] = true
				g.outputs[g.of[pr]-1] = append(g.outputs[g.of[pr]-1], v)
			}
		}
	}
	return g
}

// onGraphPool runs op i's allocations on the graph pool when the op is in
// a compiled graph: at the graph's first op (its last in the backward)
// it copies the graph's non-static inputs into placeholders, at its last
// (first) op it frees them. The returned func ends the op.
func (r *Replay) onGraphPool(i int, backward, recompute bool) func() {
	g := r.graphs
	if g == nil || g.of[i] == 0 {
		return func() {}
	}
	k := g.of[i] - 1
	gr := r.P.Graphs[k]
	start, end := int(gr.First), int(gr.End)-1
	if backward {
		start, end = end, start
	}
	prev := r.stream
	r.stream = StreamGraphPool
	if i == start && !recompute {
		r.copyGraphInputs(int(k), backward)
	}
	return func() {
		if i == end && !recompute {
			for _, id := range g.copies {
				r.release(id)
			}
			g.copies = g.copies[:0]
		}
		r.stream = prev
	}
}

// copyGraphInputs allocates graph k's placeholders: in the forward, one
// per input the replay holds; in the backward, one per gradient of an
// output that an eager op made (outside the pool).
func (r *Replay) copyGraphInputs(k int, backward bool) {
	g := r.graphs
	if !backward {
		for _, v := range g.inputs[k] {
			if r.valT[v] != none {
				g.copies = append(g.copies, r.placeholder(v, "input"))
			}
		}
	} else {
		for _, v := range g.outputs[k] {
			if t := r.gradT[v]; t != none && r.live.at(t).blk != 0 && r.alloc.Block(r.live.at(t).blk).Stream() != StreamGraphPool {
				g.copies = append(g.copies, r.placeholder(v, "gradient"))
			}
		}
	}
	if r.Plan.Runtime.CPU {
		return
	}
	bl, mem := g.blas[k], r.Plan.RuntimeMemory
	ws := func(name string, b int64) {
		if b > 0 {
			g.copies = append(g.copies, r.allocate(Alloc{Tensor: name, DType: units.INT8, Bytes: b,
				Why: name + " of a CUDA graph, allocated in its private pool while it runs (cudagraph_trees.py clear_cublas_manager)", Cat: core.CatTemporaries}))
		}
	}
	if bl.matmul {
		ws("cuBLAS workspace", mem.CublasWorkspace(r.Plan.Device))
	}
	if (!backward && bl.ltForward) || (backward && bl.ltBackward) {
		ws("cuBLASLt workspace", mem.CublasLtWorkspace(r.Plan.Device))
	}
}

// placeholder allocates the graph pool's copy of value v (or of its
// gradient).
func (r *Replay) placeholder(v core.Value, what string) int32 {
	vi := &r.P.Values[v]
	name := vi.Name + " (CUDA graph input)"
	cat := vi.Cat
	if what == "gradient" {
		name, cat = "grad of "+vi.Name+" (CUDA graph input)", core.CatTemporaries
	}
	return r.allocate(Alloc{Tensor: name, Shape: vi.Shape, DType: vi.Dtype, Bytes: vi.Bytes,
		Why: "the CUDA graph's placeholder for a non-static " + what + ", copied in before each replay", Cat: cat})
}
