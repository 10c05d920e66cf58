package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// edgeInputs is what a graph layer's forward makes of its edges before its
// blocks run (layers/mapper.py GraphTransformerBaseMapper.forward and
// layers/processor.py GraphTransformerProcessor.forward @models-0.8.1):
// the fixed attributes and index are module buffers (buffers.go);
// each forward repeats the attributes over the batch next to the
// trainable ones (TrainableTensor) and stacks the index once per sample
// (_expand_edges).
type edgeInputs struct {
	set       *EdgeSet
	attrs     int64 // edge_dim: fixed + trainable columns
	trainable int64 // trainable columns per edge
	sorted    bool  // from anemoi-models 0.16.0 the graph provider sorts the edges by destination and keeps the permutation (buffers.go)
}

// lower returns the batch's edge attributes fp32 [e, attrs], its edge
// index int64 [2, e] and e, the edges of batch samples.
func (in edgeInputs) lower(b *core.Builder, batch int64) (ea, ei core.Value, e int64) {
	in.buffers(b)
	e = in.set.Count * batch
	ea = in.attributes(b, e)
	// _expand_edges: torch.cat([edge_index + i * edge_inc for i in range(batch)], dim=1);
	// the shifted copies live in the list until the cat.
	ei = b.Ew("cat", "edge_index", nil, []int64{2, e}, units.INT64, fmt.Sprintf("edge index of the %d stacked samples (_expand_edges)", batch))
	b.Val(ei).Grad = false
	if batch > 1 {
		b.Op(b.Val(ei).Producer).WorkF = units.INT64.Bytes(2 * e)
	}
	return ea, ei, e
}

// attributes lowers TrainableTensor.forward (layers/graph.py@models-0.8.1
// l.38-40): the fixed attribute buffer and the trainable [edges,
// trainable] parameter, each repeated over the batch, concatenated: fp32
// [e, attrs].
func (in edgeInputs) attributes(b *core.Builder, e int64) core.Value {
	done := b.Scope("trainable")
	var params []int32
	if in.trainable > 0 {
		params = append(params, b.Param("trainable", []int64{in.set.Count, in.trainable}, "edge_attr"))
	}
	i := b.AddOp("cat", "edge_attr", nil, params...)
	y := b.Out(i, "edge_attr", []int64{e, in.attrs}, units.FP32, "edge attributes repeated over the batch, fixed + trainable (TrainableTensor)")
	b.Op(i).WorkF = units.FP32.Bytes(e * in.attrs) // the repeats, alive until the cat
	done()
	return y
}
