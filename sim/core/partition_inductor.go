package core

// What Inductor does to a compiled graph's backward beyond the partition
// (partition.go): the order of a linear's two gradient matmuls and the
// buffers its kernels reuse in place, both read from its output code.

// weightGradFirst marks the graph's linears whose backward Inductor
// orders weight gradient first: the matmul that reads the saved input
// (grad_output^T @ input) runs before the one that makes the input's
// gradient (grad_output @ weight), and the saved input is freed between
// them, so the input's gradient never coexists with it. The FX order of
// AOTAutograd's backward has it for mm (torch 2.15's Inductor output code
// for the Llama MLP: each mm's weight gradient, then `del` of its saved
// input, then its input gradient), and Inductor's peak-memory pass
// (torch/_inductor/memory.py, reorder_for_peak_memory, on by default)
// picks the lower-peak of the candidate orders of a graph: for a GPT-2
// stack compiled whole (torch 2.15, CPU, tools/oracle/cuda_compile_probe.py
// PROBE_DRY=1) c_fc2's addmm too, where the FX order is input gradient
// first (kept in a graph whose own estimated peak lies elsewhere: the
// same MLP cut out by a graph break). Measured on one
// H200 (sim/testdata/cuda_h200, tools/oracle/cuda_run.sh): compiled GPT-2
// blocks (addmm, bias) peak 16 MiB + 2 KiB above the forward's end, which
// needs c_fc2's 64 MiB input gradient made after c_fc's GELU output was
// freed (calib_compile_cuda_test.go).
func (gv *graphView) weightGradFirst() {
	for j := gv.g.First; j < gv.g.End; j++ {
		if op := &gv.p.Ops[j]; op.Kind == "matmul" && len(op.Params) > 0 && len(op.Saved) > 0 {
			op.WeightGradFirst = true
		}
	}
}

// gradInPlace marks the graph's unary pointwise ops (an activation) whose
// backward kernel writes the input's gradient into the buffer of the
// output's gradient, which dies there: Inductor's in-place buffer reuse
// (torch/_inductor/config.py inplace_buffers, on by default; the
// scheduler's decide_inplace_update). torch 2.15's output code for GPT-2's
// MLP: "buf5 = reinterpret_tensor(buf1, ...); del buf1  # reuse", the GELU
// backward written over c_fc2's input gradient. An op of several inputs
// or outputs is left as it is: which of them a fused kernel reuses
// depends on its fusion (the Llama MLP's SiLU and product backward, one
// kernel, reuses the saved up_proj output and allocates the gate's
// gradient).
func (gv *graphView) gradInPlace() {
	p := gv.p
	for j := gv.g.First; j < gv.g.End; j++ {
		op := &p.Ops[j]
		if !fusibleOp(op) || (len(op.In) != 1 && op.Kind != "add") || len(op.Out) != 1 || len(op.Params) > 0 {
			continue
		}
		in, out := &p.Values[op.In[0]], &p.Values[op.Out[0]]
		if !in.Fused && !out.Fused && in.Bytes == out.Bytes && in.Dtype == out.Dtype {
			op.GradInPlace = true
		}
	}
}
