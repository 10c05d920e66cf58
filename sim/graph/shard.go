package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Model sharding (anemoi's hardware.num_gpus_per_model = G; memsh's
// parallel(cp=G, cp_mode="ulysses") on a graph model), as anemoi-models
// 0.8.1 runs it (distributed/graph.py, distributed/transformer.py,
// layers/mapper.py, layers/block.py; anemoi.md section 5):
//
//   - the model input, x_data_latent, the hidden nodes' attributes, the
//     decoder's gathered output and the loss are whole on every GPU of the
//     group (the batch is read whole; keep_batch_sharded came later);
//   - each mapper splits its source and destination nodes, and its edge
//     attributes, into G row shards (shard_tensor: torch.tensor_split
//     along dim 0, a view of this rank's rows; its backward all-gathers the
//     gradient, a whole-size tensor) and runs the node-wise layers on its
//     shard;
//   - in a transformer processor layer, shard_heads all-to-alls query, key
//     and value the same way and flash attention runs over all nodes for
//     H/G heads (layers/attention.py@models-0.8.1 l.169-190);
//   - in every graph-transformer block, shard_qkve_heads all-to-alls query,
//     key, value and the projected edges from [rows/G, C] to [rows, C/G]:
//     every GPU runs the message passing over all nodes and edges for H/G
//     heads, so the per-edge tensors and the scatter outputs are a G-th of
//     one GPU's; shard_output_seq all-to-alls the result back to [rows/G,
//     C] for the projection and the node MLP;
//   - the decoder's post_process all-gathers its output rows.
//
// anemoi asserts one sample per GPU under model sharding (block.py:
// model_comm_group.size() == 1 or batch_size == 1), so stacked ensemble
// members and batches above one are refused (core validates it).

// shards is G, the GPUs one model is split over (1 without sharding).
func shards(b *core.Builder) int64 {
	if b.Par.Ulysses() {
		return b.Par.Cpn()
	}
	return 1
}

// localRows is this rank's share of n rows: tensor_split's first (largest)
// chunk.
func localRows(n, g int64) int64 { return (n + g - 1) / g }

// shardRows is shard_tensor: this rank's rows of x, a view. Its backward
// all-gathers the gradient into a tensor of x's size.
func shardRows(b *core.Builder, x core.Value, why string) core.Value {
	g := shards(b)
	if g == 1 {
		return x
	}
	n := core.Rows(b.Shape(x))
	i := b.AddOp("view", "shard_tensor", []core.Value{x})
	y := b.Out(i, b.LastName(x)+".shard", []int64{localRows(n, g), b.Last(x)}, b.Dtype(x), why)
	b.Val(y).Bytes = 0
	b.Op(i).WorkB = b.Val(x).Bytes // _SplitParallelSection backward: the gathered gradient
	b.RecordComm("all_gather", "cp", b.Val(x).Bytes, true)
	return y
}

// gatherAllRows is gather_tensor: the rows of every rank, a new tensor of
// n rows (its backward splits the gradient: a view).
func gatherAllRows(b *core.Builder, x core.Value, n int64, why string) core.Value {
	if shards(b) == 1 {
		return x
	}
	i := b.AddOp("all_gather", "gather_tensor", []core.Value{x})
	y := b.Out(i, b.LastName(x)+".gathered", []int64{n, b.Last(x)}, b.Dtype(x), why)
	b.RecordComm("all_gather", "cp", b.Val(y).Bytes, false)
	return y
}

// headsToAllRows is shard_heads: [rows/G, C] to all n rows and C/G
// channels (H/G heads), a new tensor.
func headsToAllRows(b *core.Builder, name string, x core.Value, n int64) core.Value {
	g := shards(b)
	if g == 1 {
		return x
	}
	return modelAllToAll(b, name, x, []int64{n, b.Last(x) / g},
		fmt.Sprintf("%s for all %d rows and a %d-th of the heads (shard_heads all-to-all)", name, n, g))
}

// rowsToAllHeads is shard_sequence (shard_output_seq): [n, C/G] back to
// this rank's rows and all C channels, a new tensor.
func rowsToAllHeads(b *core.Builder, name string, x core.Value, n int64) core.Value {
	g := shards(b)
	if g == 1 {
		return x
	}
	return modelAllToAll(b, name, x, []int64{localRows(n, g), b.Last(x) * g},
		name+" back to this rank's rows and all heads (shard_sequence all-to-all)")
}

func modelAllToAll(b *core.Builder, name string, x core.Value, shape []int64, why string) core.Value {
	i := b.AddOp("all_to_all", name+"_all_to_all", []core.Value{x})
	y := b.Out(i, name+"_exchanged", shape, b.Dtype(x), why)
	n := b.Val(y).Bytes
	b.RecordComm("all_to_all", "cp", n, false)
	b.RecordComm("all_to_all", "cp", n, true)
	// _headsalltoall / _seqalltoall: the contiguous input chunks and the
	// received output chunks are two transient copies while torch.cat
	// builds the result (anemoi.md section 5); the backward runs the same.
	b.Op(i).WorkF = 2 * n
	b.Op(i).WorkB = 2 * n
	return y
}

// checkShards: model sharding splits every graph-transformer block's
// heads (the mappers', and either processor's); with no heads given, the
// edge sharding of 0.17.0 and later, which splits nodes and edges.
func checkShards(path string, par core.Parallelism, heads ...int64) error {
	n := par.Norm()
	if n.CP == 1 {
		return nil
	}
	if n.CPMode != "ulysses" {
		what := "heads"
		if len(heads) == 0 {
			what = "nodes and edges"
		}
		return &units.Error{Path: path, Msg: fmt.Sprintf("cp=%d on a graph model is anemoi's model sharding (num_gpus_per_model), which splits %s", n.CP, what),
			Hint: "pass cp_mode=\"ulysses\""}
	}
	for _, h := range heads {
		if h%n.CP != 0 {
			return &units.Error{Path: path, Msg: fmt.Sprintf("cp=%d does not divide the %d heads (model sharding splits each graph-transformer block's heads)", n.CP, h)}
		}
	}
	return nil
}

// shardQKVE is shard_qkve_heads: query over all rAll destination rows, key
// and value over all sAll source rows, the edges over all e edges, each
// for a G-th of the heads (views on one GPU).
func shardQKVE(b *core.Builder, q, key, val, edges core.Value, rAll, sAll, e int64) (core.Value, core.Value, core.Value, core.Value) {
	return headsToAllRows(b, "query", q, rAll), headsToAllRows(b, "key", key, sAll),
		headsToAllRows(b, "value", val, sAll), headsToAllRows(b, "edges", edges, e)
}

// shardedAttention is the message passing each GPU runs: a G-th of the
// channels and heads.
func shardedAttention(b *core.Builder, channels, heads int64, backend string) edgeAttention {
	g := shards(b)
	return edgeAttention{channels: channels / g, heads: heads / g, backend: backend}
}

// CheckLayout: model sharding splits the mapper's heads (0.8.1), or its
// destination nodes and edges (0.17.0 and later, shard_edges.go); the
// edge sharding of 0.9.0 to 0.16.0, whose processor had no halo exchange
// yet, is not simulated.
func (g *GraphTransformer) CheckLayout(path string, par core.Parallelism) error {
	if g.chunkedMapper() && par.Norm().CP > 1 && !g.Version.EdgeSharded() {
		return &units.Error{Path: path, Msg: fmt.Sprintf("model sharding of anemoi-models %s's mappers (shard_strategy \"edges\" before 0.17.0's halo exchange) is not simulated", g.Version),
			Hint: "anemoi=\"0.17\" or later replays edge sharding as models-0.18.0 runs it; anemoi=\"0.8.1\" replays 0.8.1's head sharding"}
	}
	if g.Version.EdgeSharded() {
		return checkShards(path, par)
	}
	return checkShards(path, par, g.Heads)
}

// CheckLayout: model sharding splits the processor's heads (0.8.1), or
// its nodes and edges (0.17.0 and later).
func (p *GraphTransformerProcessor) CheckLayout(path string, par core.Parallelism) error {
	if p.Version.EdgeSharded() {
		return checkShards(path, par)
	}
	return checkShards(path, par, p.Heads)
}

// CheckLayout: model sharding splits the transformer processor's heads
// (shard_heads, layers/attention.py@models-0.8.1 l.169-171).
func (p *TransformerProcessor) CheckLayout(path string, par core.Parallelism) error {
	return checkShards(path, par, p.Heads)
}
