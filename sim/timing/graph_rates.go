package timing

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// PyG's message passing on a GPU whose eager kernels were measured
// (hw.GraphKernels: an H200, and the H100 SXM by the same die): each op
// priced by what bounds it in the measurement rather than by its bytes at
// the copy rate.
//
//   - A row gather (index_select) streams its access-pattern bytes (an
//     index, the rows read that miss L2, the output) at GatherDRAM of the
//     peak, writes its output at GatherWrite at most, and copies at most
//     GatherRows rows a second; with a sorted index (SortedIndex: PyG's
//     x_i) each source row is read from DRAM once.
//   - Its backward, index_add_ into a zeroed tensor of the source's
//     shape: the zero fill at the copy rate, then IndexAdd elements a
//     second (IndexAdd64 past 2^31 elements), or its bytes at the copy
//     rate, whichever is slower.
//   - scatter_add_ likewise at ScatterAdd elements a second; its backward
//     is a gather at its (destination, sorted) index.
//   - A per-head broadcast multiply ([rows, c] by [rows, h], h < c) at
//     Broadcast of the peak; its backward is another broadcast multiply
//     for the wide operand and, for the per-head one, a contiguous
//     multiply and a head sum (autograd's sum_to_size).
//   - A head sum ([rows, c] to [rows, h], c / h <= HeadSumMax) at
//     HeadSumRows rows a second, HeadSumElems elements over 2-byte
//     inputs, or its bytes at the copy rate, whichever is slowest. Its
//     backward (an expand feeding the next kernel) stays priced as
//     stream's: the expanded gradient written once.
//
// torch.compile (DispatchCompiled, and DispatchCUDAGraphs, which compiles
// too) generates its own gathers and scatters: those keep the
// access-pattern bytes at the copy rate.

// graphRates is the GPU's measured graph kernels, ok false where there
// are none or the plan is compiled.
func (pr *pricer) graphRates() (*hw.GraphKernels, bool) {
	g := &pr.d.RatesRef().Graph
	compiled := pr.dispatch == DispatchCompiled || pr.dispatch == DispatchCUDAGraphs
	return g, g.Measured() && !compiled && pr.d.HBMGBps > 0
}

// peakBytes is the HBM peak, bytes/s.
func (pr *pricer) peakBytes() float64 { return pr.d.HBMGBps * 1e9 }

// width is 0 for 2-byte elements, 1 for 4-byte ones, -1 otherwise.
func width(dt units.DType) int {
	switch elemBytes(dt) {
	case 2:
		return 0
	case 4:
		return 1
	}
	return -1
}

// gatherTime is a row gather of rows rows of row bytes from a table of
// table bytes, its index sorted or not.
func (pr *pricer) gatherTime(g *hw.GraphKernels, rows, row, table float64, sorted bool) float64 {
	reads := rows * rowRead(row)
	if sorted {
		reads = min(reads, table)
	} else {
		reads = pr.dramReads(reads, table)
	}
	out := rows * row
	peak := pr.peakBytes()
	return max((rows*indexBytes+reads+out)/(g.GatherDRAM*peak), out/(g.GatherWrite*peak), rows/g.GatherRows)
}

// atomicAddTime is index_add_ (rate IndexAdd) or scatter_add_ (ScatterAdd)
// of n elements of dt into a zeroed output of zero bytes, whose atomic
// read-modify-writes move bytes: the zero fill at the copy rate, then the
// slower of the elements at the measured rate and the bytes at the copy
// rate. ok is false for an element width without a rate.
func (pr *pricer) atomicAddTime(rates [2]float64, n float64, dt units.DType, zero, bytes float64) (float64, bool) {
	w := width(dt)
	if w < 0 || rates[w] <= 0 {
		return 0, false
	}
	s := streamRate(&pr.d)
	return zero/s + max(n/rates[w], bytes/s), true
}

// indexAddRates is the index_add_ rates for an op over tensors of at
// most n elements: 64-bit index arithmetic past 2^31 (ATen's
// canUse32BitIndexMath).
func indexAddRates(g *hw.GraphKernels, n float64) [2]float64 {
	if n > math.MaxInt32 {
		return g.IndexAdd64
	}
	return g.IndexAdd
}

// headGroups reports whether in [.., c] reduces to out [.., h] per group
// of d = c / h <= max elements (the rows alike, h > 1), and h and d.
func headGroups(in, out []int64, most int64) (h, d int64, ok bool) {
	if len(in) < 2 || len(in) != len(out) || most <= 0 {
		return 0, 0, false
	}
	c, h := in[len(in)-1], out[len(out)-1]
	for i := range len(in) - 1 {
		if in[i] != out[i] {
			return 0, 0, false
		}
	}
	if h <= 1 || c <= h || c%h != 0 || c/h > most {
		return 0, 0, false
	}
	return h, c / h, true
}

// headSumTime is a sum over groups of d elements of dt, rows groups.
func (pr *pricer) headSumTime(g *hw.GraphKernels, rows, d float64, dt units.DType) float64 {
	t := rows / g.HeadSumRows
	if width(dt) == 0 && g.HeadSumElems > 0 {
		t = max(t, rows*d/g.HeadSumElems)
	}
	return max(t, rows*d*elemBytes(dt)/streamRate(&pr.d))
}

// headSum prices a per-head sum; ok is false for other sums.
func (pr *pricer) headSum(op *core.OpInfo) (OpCost, bool) {
	g, ok := pr.graphRates()
	if !ok || len(op.In) != 1 || len(op.Out) != 1 {
		return OpCost{}, false
	}
	p := pr.prog
	in, out := &p.Values[op.In[0]], &p.Values[op.Out[0]]
	h, d, ok := headGroups(in.Shape, out.Shape, g.HeadSumMax)
	if !ok || width(in.Dtype) < 0 {
		return OpCost{}, false
	}
	c := pr.stream(op, op.Bytes)
	rows := float64(core.Rows(in.Shape) * h)
	c.Fwd, c.Bound = kernelTime(0, pr.headSumTime(g, rows, float64(d), in.Dtype))
	return c, true
}

// broadcastMul prices a multiply of [rows, c] by [rows, h] (1 < h < c);
// ok is false for other multiplies.
func (pr *pricer) broadcastMul(op *core.OpInfo) (OpCost, bool) {
	g, ok := pr.graphRates()
	if !ok || len(op.In) != 2 || len(op.Out) != 1 {
		return OpCost{}, false
	}
	p := pr.prog
	wide, narrow := &p.Values[op.In[0]], &p.Values[op.In[1]]
	if narrow.Bytes > wide.Bytes {
		wide, narrow = narrow, wide
	}
	out := &p.Values[op.Out[0]]
	h, d, ok := headGroups(wide.Shape, narrow.Shape, math.MaxInt64)
	if !ok {
		return OpCost{}, false
	}
	frac := broadcastFrac(g, wide.Dtype, out.Dtype)
	if frac <= 0 {
		return OpCost{}, false
	}
	peak := pr.peakBytes()
	ob, wb, nb := float64(out.Bytes), float64(wide.Bytes), float64(narrow.Bytes)
	c := OpCost{FwdK: 1, Flops: op.Flops, Bytes: wb + nb + ob}
	c.Fwd, c.Bound = kernelTime(0, (wb+nb+ob)/(frac*peak))
	if in, _ := pr.needsGrad(op); !in {
		return c, true
	}
	s := streamRate(&pr.d)
	var bwd float64
	if wide.Grad {
		// grad * narrow, in the output's dtype, cast to the wide input's
		bwd += (2*ob + nb) / (broadcastFrac(g, out.Dtype, out.Dtype) * peak)
		c.BwdK++
		if wide.Dtype != out.Dtype {
			bwd += (ob + wb) / s
			c.BwdK++
		}
	}
	if narrow.Grad {
		// (grad * wide).sum_to_size(narrow): a multiply, a head sum
		bwd += (2*ob+wb)/s + pr.headSumTime(g, float64(core.Rows(narrow.Shape)*h), float64(d), out.Dtype)
		c.BwdK += 2
	}
	c.Bwd, _ = kernelTime(0, bwd)
	return c, true
}

// broadcastFrac is the measured fraction of the peak for a broadcast
// multiply with wide operand in and output out; 0 where unmeasured.
func broadcastFrac(g *hw.GraphKernels, in, out units.DType) float64 {
	switch wi, wo := width(in), width(out); {
	case wi == 0 && wo == 0:
		return g.Broadcast[0]
	case wi == 1 && wo == 1:
		return g.Broadcast[1]
	case wi == 0 && wo == 1:
		return g.Broadcast[2]
	}
	return 0
}
