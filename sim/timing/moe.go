package timing

import "github.com/memsh/memsh/sim/core"

// chunkCopy prices a copy of whole contiguous chunks of rows into another
// order (Megatron's sort_chunks_by_idxs between the expert all-to-all and
// the grouped GEMM, nn/moe_megatron.go): each chunk is read and written
// once at the copy bandwidth, and the backward copies the gradient back
// the same way (the split's gradient concatenated, or Transformer
// Engine's moe_sort_chunks_by_index backward): one kernel each way.
// op.Bytes is the bytes read and written.
func (pr *pricer) chunkCopy(op *core.OpInfo) OpCost {
	c := OpCost{FwdK: 1, Bytes: op.Bytes}
	c.Fwd, c.Bound = streamTime(&pr.d, op.Bytes)
	if in, _ := pr.needsGrad(op); in {
		c.Bwd, _ = streamTime(&pr.d, op.Bytes)
		c.BwdK = 1
	}
	return c
}
