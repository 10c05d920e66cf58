package timing

import (
	"math"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// The price of every op of a lowered program: its forward and backward
// on the GPU (kernels.go), the kernels it launches and their CPU dispatch
// (dispatch.go), its FLOPs and HBM bytes, and what bounds it.
//
// Matmuls are GEMMs of the shape the op records (M rows of the output, N
// its last dimension, K = FLOPs / 2MN; a batched matmul without
// parameters is batch x M x N x K). Their backward runs the input-gradient
// GEMM when the input needs a gradient and the weight-gradient GEMM (the
// reduction over M) when a weight is trainable: a frozen LoRA base costs
// one GEMM backward, not two. Grouped matmuls are a GEMM per local expert
// over its rows. Flash attention takes its kernel's curve (kernels.go).
// Gathers and scatters are priced from their access pattern (graph.go).
// The rest stream their bytes (eager attention's causal masked_fill and
// softmax forwards at a measured fraction of the rate where the GPU has
// one: eager.go); their backward streams twice the bytes
// (the output gradient and saved inputs in, the input gradient out) when
// an input needs a gradient, except where autograd's rule for the op
// says otherwise (backward.go: adds, casts, and the sums of gradients of
// a tensor used twice).

// Bound is what limits an op's time (or a module's, or a step term).
type Bound uint8

// The bounds.
const (
	BoundNone Bound = iota
	BoundCompute
	BoundMemory
	BoundLaunch // kernel-launch floor or CPU dispatch
)

var boundNames = [...]string{"", "compute", "memory", "launch"}

func (b Bound) String() string { return boundNames[b] }

// OpCost is the priced forward and backward of one op.
type OpCost struct {
	Fwd, Bwd       float64 // GPU seconds
	FwdCPU, BwdCPU float64 // CPU dispatch seconds
	FwdK, BwdK     float64 // kernels launched
	Flops, Bytes   float64 // forward FLOPs and HBM bytes
	Bound          Bound   // of the forward (the backward's when there is no forward work)
	Attention      bool    // a fused attention kernel (context parallelism overlaps it)
	// Dgrad and Wgrad are a linear's input- and weight-gradient GEMMs
	// (parts of Bwd): what Megatron's tensor-parallel collectives run
	// beside (comm.go, tpOverlap).
	Dgrad, Wgrad float64
}

// pricer prices the ops of one program for one plan.
type pricer struct {
	prog     *core.Program
	d        hw.Device
	dispatch Dispatch
	users    []int32 // last op reading each value (-1: none)
	saved    []bool  // values saved for backward
	// scalarIndexSelect: the runtime's index_select copies fp16 and bf16
	// an element at a time (core.Runtime.ScalarIndexSelect).
	scalarIndexSelect bool
	// sdpaCuDNN: the runtime's SDPA runs cuDNN's attention
	// (core.Runtime.SDPACuDNN) where the GPU has its rates.
	sdpaCuDNN bool
	// accum, accumK: the bytes and kernels of the gradient sums each
	// op's backward runs (eager dispatch; backward.go, gradUses).
	accum, accumK []float64
	paramsDT      units.DType // the parameters' dtype (a weight cast's source)
	autocastDT    units.DType // autocast's compute dtype, InvalidDType without autocast
}

func newPricer(prog *core.Program, plan *core.Plan, s *Prices) *pricer {
	pr := &s.pr // s's, not one of its own: s prices one program at a time
	*pr = pricer{prog: prog, d: plan.Device, dispatch: DispatchOf(plan), scalarIndexSelect: plan.Runtime.ScalarIndexSelect,
		sdpaCuDNN: plan.Runtime.SDPACuDNN, paramsDT: plan.Precision.Params, autocastDT: units.InvalidDType}
	if plan.Precision.Autocast {
		pr.autocastDT = plan.Precision.Compute
	}
	if pr.dispatch.fuses() {
		s.users, s.saved = resize(s.users, len(prog.Values)), resize(s.saved, len(prog.Values))
		pr.users, pr.saved = s.users, s.saved
		clear(pr.saved)
		for v := range pr.users {
			pr.users[v] = -1
		}
		for i := range prog.Ops {
			for _, v := range prog.Ops[i].In {
				pr.users[v] = int32(i)
			}
			for _, v := range prog.Ops[i].Saved {
				pr.saved[v] = true
			}
		}
		for _, vs := range [...][]core.Value{{prog.Loss}, prog.Held, prog.HeldBackward} { // no list built per layout
			for _, v := range vs {
				if v >= 0 {
					pr.saved[v] = true
				}
			}
		}
	} else {
		pr.gradUses(s)
	}
	return pr
}

// PriceOps prices every op of prog for plan.
func PriceOps(prog *core.Program, plan *core.Plan) []OpCost {
	var s Prices
	return s.Of(prog, plan)
}

// Prices keeps PriceOps' lists from one program to the next: the costs
// and the pricer's two lists per value. The search prices thousands of
// small programs (its block profiles, search.unitOf), each of which made
// them anew (8 % of BenchmarkSearchLlama70B1024's bytes). A Prices
// belongs to one goroutine.
type Prices struct {
	costs         []OpCost
	users         []int32
	saved         []bool
	accum, accumK []float64 // gradUses' lists
	last          []int32
	sliced        []bool
	comm          commScratch // SumCommOf's (tp_overlap.go)
	pr            pricer      // the program's pricer (newPricer)
}

// Of is PriceOps(prog, plan), written into s's lists: the costs it
// returns are valid until s prices the next program.
func (s *Prices) Of(prog *core.Program, plan *core.Plan) []OpCost {
	pr := newPricer(prog, plan, s)
	s.costs = resize(s.costs, len(prog.Ops))
	out := s.costs
	clear(out)
	for i := 0; i < len(prog.Ops); {
		if pr.dispatch.fuses() && pointwise(&prog.Ops[i]) {
			j := i + 1
			for j < len(prog.Ops) && pointwise(&prog.Ops[j]) {
				j++
			}
			pr.fusedGroup(i, j, out)
			i = j
			continue
		}
		out[i] = pr.op(i)
		pr.gradAccumulation(i, &out[i])
		pr.addDispatch(&out[i])
		pr.hostOps(&prog.Ops[i], &out[i])
		i++
	}
	if plan.Overheads.TrainMetrics > 0 { // the loop's metrics after each backward, forward-only kernels (train_metrics.go)
		if at, t, _ := trainMetricsTime(prog, plan); at >= 0 {
			out[at].Fwd += t
		}
	}
	return out
}

// op prices op i on its own.
func (pr *pricer) op(i int) OpCost {
	op := &pr.prog.Ops[i]
	if c, ok := pr.stridedOp(op); ok { // strided.go
		return c
	}
	if c, ok := pr.rowMean(op); ok { // row_mean.go
		return c
	}
	if c, ok := pr.crossEntropy(op); ok { // log_softmax.go
		return c
	}
	if c, ok := pr.logSoftmax(op); ok { // log_softmax.go
		return c
	}
	switch op.Kind {
	case "matmul", "int8_matmul":
		return pr.matmul(op)
	case "grouped_matmul":
		return pr.groupedMatmul(op)
	case core.CCEOp:
		return pr.cce(op) // cce.go
	case core.TRLLogProbOp:
		return pr.trlLogProb(op) // trl_fused_head.go
	case "attention":
		return pr.attention(op)
	case "all_gather", "reduce_scatter", "all_to_all", "recv", "send":
		return OpCost{} // collectives: timed by comm.go
	case "chunk_copy":
		return pr.chunkCopy(op) // moe.go
	case "rope":
		if c, ok := pr.hfRope(op); ok { // rope.go
			return c
		}
	}
	if c, ok := pr.graphOp(op); ok {
		return c
	}
	return pr.stream(op, op.Bytes)
}

// needsGrad reports whether op's backward computes anything: an input
// needs a gradient (and the op produces input gradients) or a parameter
// is trainable (core.Program.OpNeedsGrad, which model FLOPs read too).
func (pr *pricer) needsGrad(op *core.OpInfo) (input, weight bool) {
	return pr.prog.OpNeedsGrad(op)
}

// stream prices a memory-bound op moving bytes forward.
func (pr *pricer) stream(op *core.OpInfo, bytes float64) OpCost {
	if bytes <= 0 && op.Flops <= 0 {
		return OpCost{} // a view, or bookkeeping: no kernel
	}
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: bytes}
	c.Fwd, c.Bound = streamTime(&pr.d, bytes)
	f := eagerFraction(&pr.d, pr.prog, op)
	if f > 0 {
		c.Fwd, c.Bound = streamTime(&pr.d, bytes/f) // a slower kernel: its bytes at f of the rate
	}
	if in, w := pr.needsGrad(op); in || w {
		bwd, k := 2*bytes, 1.0 // the output's gradient and saved inputs in, the inputs' gradients out
		fq, fk, isFQ := pr.fakeQuantBackward(op)
		switch {
		case isFQ: // a fake quantizer's round, sub, clamp or promoting product (fake_quant.go)
			bwd, k = fq, fk
		case op.Kind == "add" || op.Kind == "add_": // the gradient passed through (backward.go)
			bwd, k = pr.addBackward(op)
		case op.Kind == "pow": // pow_backward's three kernels (backward.go)
			bwd, k = pr.powBackward(op)
		case op.Kind == "masked_fill" && f > 0: // grad.masked_fill(mask, 0): the forward's kernel again (eager.go)
			bwd = bytes / f
		case castBackward(pr.prog, op): // one cast back
			bwd = bytes
			if f := pr.upcastBack(op); f > 0 {
				bwd = bytes / f // the cast back is an upcast: a slower kernel
			}
		}
		if k > 0 {
			c.Bwd, _ = streamTime(&pr.d, bwd)
			c.Bwd = max(c.Bwd, k*kernelFloor)
			c.BwdK = k
		}
	}
	return c
}

// mainOut is the output a matmul computes (eager attention's q @ k^T also
// writes the contiguous copies it saves, before its scores).
func mainOut(op *core.OpInfo) core.Value { return op.Out[len(op.Out)-1] }

// matmul prices a GEMM (a linear layer) or a batched matmul (eager
// attention's q @ k^T and p @ v).
func (pr *pricer) matmul(op *core.OpInfo) OpCost {
	if len(op.Out) == 0 || len(op.In) == 0 {
		return pr.stream(op, op.Bytes)
	}
	o := &pr.prog.Values[mainOut(op)]
	numel := float64(core.Numel(o.Shape))
	if numel <= 0 || op.Flops <= 0 {
		return pr.stream(op, op.Bytes)
	}
	n := float64(o.Shape[len(o.Shape)-1])
	b, m := 1.0, numel/n
	if len(op.Params) == 0 && len(o.Shape) >= 3 {
		m = float64(o.Shape[len(o.Shape)-2])
		b = numel / (m * n)
	}
	k := op.Flops / (2 * numel)
	dt := o.Dtype
	if pr.prog.Values[op.In[0]].Dtype == units.FP8 {
		dt = units.FP8 // torch._scaled_mm of a float8 linear: all three GEMMs take fp8 operands
	}
	in := elemBytes(pr.prog.Values[op.In[0]].Dtype)
	out := elemBytes(o.Dtype)
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: b * ((m*k+k*n)*in + m*n*out)}
	c.Fwd, c.Bound = gemmTime(&pr.d, dt, b, m, n, k, in, out)
	// Copies the op writes besides its result (eager attention's
	// contiguous q and k^T): read and written once each.
	var extra float64
	for _, v := range op.Out[:len(op.Out)-1] {
		extra += 2 * float64(pr.prog.Values[v].Bytes)
	}
	if extra > 0 {
		t, _ := streamTime(&pr.d, extra)
		c.Fwd += t
		c.Bytes += extra
		c.FwdK++
	}
	input, weight := pr.needsGrad(op)
	if len(op.Params) > 0 && len(op.In) > 1 && pr.prog.Values[op.In[1]].Grad && pr.prog.GradsInputs(op) {
		weight = true // the weight an activation beside a parameter bias (PEFT's merged expert slice with gpt-oss's bias)
	}
	if len(op.Params) == 0 {
		// both operands are activations: each needing a gradient gets a GEMM
		input, weight = false, false
		for j, v := range op.In {
			if j < 2 && pr.prog.Values[v].Grad && pr.prog.GradsInputs(op) {
				t, _ := gemmTime(&pr.d, dt, b, m, k, n, in, out)
				c.Bwd += t
				c.BwdK++
			}
		}
	}
	if input { // dX = dY W: (m x n) by (n x k)
		t, _ := gemmTime(&pr.d, dt, b, m, k, n, in, out)
		c.Bwd += t
		c.Dgrad = t
		c.BwdK++
	}
	if weight { // dW = X^T dY: (k x m) by (m x n)
		t, _ := gemmTime(&pr.d, dt, b, k, n, m, in, out)
		c.Bwd += t
		c.Wgrad = t
		c.BwdK++
	}
	if op.BwdStream > 0 && (input || weight) { // a float8 linear's casts and layout copies
		t, _ := streamTime(&pr.d, op.BwdStream)
		c.Bwd += max(t, float64(op.BwdStreamK)*kernelFloor)
		c.BwdK += float64(op.BwdStreamK)
	}
	return c
}

// groupedMatmul prices the experts' GEMMs: one per local expert (one
// weight per expert) over its share of the routed rows. A grouped kernel
// (Megatron's GroupedGEMM, dispatch fused or compiled) launches once; the
// Hugging Face expert loop (eager) launches a GEMM per expert. With expert
// parallelism the lowering sizes the rows as the busiest rank receives them
// (parallel(expert_load=), core/expert.go): every rank waits for it at the
// combine all-to-all, so the step runs at its pace.
func (pr *pricer) groupedMatmul(op *core.OpInfo) OpCost {
	g := float64(max(len(op.Params), 1))
	if len(op.Out) == 0 || op.Flops <= 0 {
		return pr.stream(op, op.Bytes)
	}
	o := &pr.prog.Values[op.Out[0]]
	numel := float64(core.Numel(o.Shape))
	n := float64(o.Shape[len(o.Shape)-1])
	rows := numel / n
	k := op.Flops / (2 * numel)
	m := rows / g
	dt := o.Dtype
	in := elemBytes(pr.prog.Values[op.In[0]].Dtype)
	out := elemBytes(dt)
	if pr.prog.Values[op.In[0]].Dtype == units.FP8 {
		dt = units.FP8 // Transformer Engine's fp8 GroupedLinear: all three grouped GEMMs take fp8 operands
	}
	launches := 1.0
	if !pr.dispatch.fuses() {
		launches = g
	}
	c := OpCost{FwdK: launches, Flops: op.Flops, Bytes: g * ((m*k+k*n)*in + m*n*out)}
	c.Fwd, c.Bound = gemmTime(&pr.d, dt, g, m, n, k, in, out)
	c.Fwd = max(c.Fwd, launches*kernelFloor)
	input, weight := pr.needsGrad(op)
	if len(op.Params) == 0 && len(op.In) == 2 && pr.prog.GradsInputs(op) {
		// the weight an activation (PEFT's merged expert weight,
		// core.Builder.ParamLoRA): each operand needing a gradient gets
		// its grouped GEMM
		input, weight = pr.prog.Values[op.In[0]].Grad, pr.prog.Values[op.In[1]].Grad
	}
	if input {
		t, _ := gemmTime(&pr.d, dt, g, m, k, n, in, out)
		c.Bwd += max(t, launches*kernelFloor)
		c.BwdK += launches
	}
	if weight {
		t, _ := gemmTime(&pr.d, dt, g, k, n, m, in, out)
		c.Bwd += max(t, launches*kernelFloor)
		c.BwdK += launches
	}
	if op.BwdStream > 0 && (input || weight) { // TE's grad_output quantization
		t, _ := streamTime(&pr.d, op.BwdStream)
		c.Bwd += max(t, float64(op.BwdStreamK)*kernelFloor)
		c.BwdK += float64(op.BwdStreamK)
	}
	return c
}

// attention prices a fused attention kernel (flash or SDPA): the kernel
// of the plan's dispatch (the vendor's fused attention for "fused"),
// forward and backward (FlashAttention-2's backward is three kernels:
// preprocessing, the main kernel, the dq conversion).
func (pr *pricer) attention(op *core.OpInfo) OpCost {
	if len(op.In) == 0 || len(op.Out) < 2 || op.Flops <= 0 {
		return pr.stream(op, op.Bytes)
	}
	q := &pr.prog.Values[op.In[0]]
	lse := &pr.prog.Values[op.Out[1]] // [tokens, heads]
	rows := float64(core.Rows(q.Shape))
	seq := rows
	if len(q.Shape) >= 3 {
		seq = float64(q.Shape[len(q.Shape)-2])
	}
	width := float64(q.Shape[len(q.Shape)-1])
	heads := float64(lse.Shape[len(lse.Shape)-1])
	full := 4 * rows * seq * width // no mask
	a := attnShape{flops: op.Flops, seq: seq, causal: op.Flops < 0.75*full,
		blocks: rows / seq * heads * ceilDiv(seq, attnBlockRows)}
	r := pr.d.RatesRef()
	k := r.Flash
	switch {
	case pr.dispatch == DispatchFused:
		k = r.Fused
	case pr.sdpaCuDNN && strings.HasSuffix(op.Name, "sdpa_attention") && r.SDPA.Name != "":
		k = r.SDPA // torch's SDPA on a runtime that prefers cuDNN
	}
	dt := q.Dtype
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: op.Bytes, Attention: true}
	in, _ := pr.needsGrad(op)
	if op.Varlen && len(pr.prog.Docs) > 0 {
		c.Fwd, c.Bwd, c.Bound = varlenTime(&pr.d, dt, k, pr.prog.Docs, op.Flops, heads, rows)
		if in {
			c.BwdK = 3
		} else {
			c.Bwd = 0
		}
		return c
	}
	c.Fwd, c.Bound = attentionTime(&pr.d, dt, k, a, false)
	if in {
		c.Bwd, _ = attentionTime(&pr.d, dt, k, a, true)
		c.BwdK = 3
	}
	return c
}

// varlenTime prices flash-attn's varlen kernel over documents of the
// lengths docs, back to back in rows tokens: each document a causal
// sequence of its own, run at the FlashAttention curve's rate for its
// length (a short document runs at a short sequence's efficiency), its
// share of the op's FLOPs by its l (l + 1) / 2 scores; one launch, whose
// blocks are every document's (one wave fill for them all, one floor).
func varlenTime(d *hw.Device, dt units.DType, k hw.AttnKernel, docs []int64, flops, heads, rows float64) (fwd, bwd float64, bound Bound) {
	var pairs, blocks float64
	for _, l := range docs {
		pairs += float64(l) * float64(l+1) / 2
		blocks += heads * ceilDiv(float64(l), attnBlockRows)
	}
	blocks *= rows / sumOf(docs) // docs describe one row of the rows
	r := d.RatesRef()
	fill := r.Sustain * waveFill(blocks, r.SMs) / publishedWaveFill
	peak := peakFLOPS(d, dt)
	var f, bw float64
	for _, l := range docs {
		share := flops * float64(l) * float64(l+1) / 2 / pairs
		ff := k.Pass(false, true).At(float64(l)) * fill
		fb := k.Pass(true, true).At(float64(l)) * fill
		if ff <= 0 || fb <= 0 {
			return kernelFloor, kernelFloor, BoundLaunch
		}
		f += share / (peak * min(ff, 1))
		bw += share * attnBackwardFLOPs / (peak * min(fb, 1))
	}
	fwd, bound = kernelTime(f, 0)
	bwd, _ = kernelTime(bw, 0)
	return fwd, bwd, bound
}

func sumOf(xs []int64) float64 {
	var s float64
	for _, x := range xs {
		s += float64(x)
	}
	return s
}

func ceilDiv(a, b float64) float64 { return math.Ceil(a / b) }

// pointwise reports whether op is an elementwise or row-wise op that a
// compiler (Inductor) or a hand-fused kernel (Transformer Engine, Apex)
// fuses with its neighbours: not a matmul, attention (graph attention: a
// Triton kernel of its own), gather, scatter,
// collective, loss or a weight cast (autocast casts each weight once, on
// its own).
func pointwise(op *core.OpInfo) bool {
	switch op.Kind {
	case "matmul", "int8_matmul", "grouped_matmul", "attention", "graph_attention", "conv1d",
		"embedding", "table_lookup", "gather", "index_select", "index", "index_add", "index_copy", "scatter_add",
		"all_gather", "reduce_scatter", "all_to_all", "recv", "send", "chunk_copy",
		"cross_entropy", "mse_loss", "topk", "dequantize", core.CCEOp, core.TRLLogProbOp, "nonzero", "int8_vectorwise_quant":
		return false
	case "cast":
		return len(op.In) > 0
	}
	return true
}

// fusedGroup prices ops [a, b), all pointwise, as one fused kernel: it
// reads the values produced outside the group once and writes the values
// read after it or saved for backward once; what stays inside never
// reaches HBM. Its backward is one kernel streaming twice those bytes
// (once for casts alone: bwdFactor).
// The group's time is shared among its ops by their own bytes.
func (pr *pricer) fusedGroup(a, b int, out []OpCost) {
	p := pr.prog
	var bytes, own, flops float64
	grad := false
	seen := map[core.Value]bool{}
	for i := a; i < b; i++ {
		op := &p.Ops[i]
		own += op.Bytes
		flops += op.Flops
		for _, v := range op.In {
			if prod := p.Values[v].Producer; (int(prod) < a || int(prod) >= b) && !seen[v] {
				seen[v] = true
				bytes += float64(p.Values[v].Bytes)
			}
		}
		for _, v := range op.Out {
			if int(pr.users[v]) >= b || pr.saved[v] {
				bytes += float64(p.Values[v].Bytes)
			}
		}
		if in, w := pr.needsGrad(op); in || w {
			grad = true
		}
	}
	if bytes <= 0 && flops <= 0 {
		return
	}
	fwd, bound := streamTime(&pr.d, bytes)
	var bwd float64
	if grad {
		bwd, _ = streamTime(&pr.d, bwdFactor(p, p.Ops[a:b])*bytes)
	}
	for i := a; i < b; i++ {
		share := 1 / float64(b-a)
		if own > 0 {
			share = p.Ops[i].Bytes / own
		}
		c := OpCost{Fwd: share * fwd, Bwd: share * bwd, FwdK: share, Flops: p.Ops[i].Flops, Bytes: share * bytes, Bound: bound}
		if grad {
			c.BwdK = share
		}
		pr.addDispatch(&c)
		pr.hostOps(&p.Ops[i], &c)
		out[i] = c
	}
}

// bwdFactor is how many times a fused group's forward bytes its backward
// streams: twice for the general pointwise op (it reads the output's
// gradient and the saved inputs and writes the inputs' gradients), once
// for a group of casts alone, whose backward is one cast of the gradient
// back (PyTorch's tools/autograd/derivatives.yaml: _to_copy's gradient
// is _to_copy_backward(grad, self.options()), grad.to(...): it reads
// the gradient in the output's dtype and writes it in the input's, the
// forward's bytes). An op of the group with no backward (the loss's
// int64 label copies beside the logits' upcast: core.Program.HasBackward)
// adds nothing to it.
func bwdFactor(p *core.Program, ops []core.OpInfo) float64 {
	for i := range ops {
		if ops[i].Kind != "cast" && p.HasBackward(&ops[i]) {
			return 2
		}
	}
	return 1
}

// elemBytes is the size of an element of dt in bytes (half a byte for
// 4-bit types).
func elemBytes(dt units.DType) float64 { return float64(dt.Bits()) / 8 }

// resize is xs with length n, its array reused when it has room (the
// elements are the caller's to set).
func resize[T any](xs []T, n int) []T {
	if cap(xs) < n {
		return make([]T, n)
	}
	return xs[:n]
}
