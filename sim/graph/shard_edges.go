package graph

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Model sharding as anemoi-models 0.17.0 and later run it
// (hardware.num_gpus_per_model = G, shard_strategy "edges", the default of
// the mappers and the graph-transformer processor; read at models-0.18.0,
// ecmwf/anemoi-core c3c7a893):
//
//   - the graph provider sorts every graph's edges by destination node once
//     (layers/graph_provider.py l.184-187) and get_edges shards them with
//     shard_edges_1hop (distributed/khop_edges.py l.266-314): each GPU keeps
//     the edges into its destination rows, tensor_split of the destination
//     nodes (get_balanced_partition_sizes: the first ranks one row more).
//     shard_tensor along dim 0 of edge_attr is a view of its rows, which
//     keeps the whole tensor's storage; along dim 1 of edge_index it is
//     _split's .contiguous() of a column slice, a copy [2, E_r] int64
//     (distributed/primitives.py l.24-57). shard_tensor's backward
//     all-gathers the gradient into a whole-size tensor (graph.py l.296-343);
//   - the hidden nodes' attributes are sharded by rows (a view), and with
//     keep_batch_sharded (model.keep_batch_sharded, default True; the data
//     loader's read group is the model's GPUs) each GPU reads its rows of
//     the grid: the batch, the model input, x_data_latent, the decoder's
//     output and the loss are a G-th (encoder_processor_decoder.py
//     l.98-129, l.229-330);
//   - each mapper (mapper_partitioned.go) gathers its source nodes when they
//     are sharded (sync_tensor: all-gather forward, all-reduce and split
//     backward), keeps the rows its edges read (_drop_unconnected_src_nodes:
//     a copy), and runs its chunks over this GPU's destination rows; the
//     encoder keeps its output sharded for the processor, the decoder
//     gathers its output unless the batch is kept sharded;
//   - every graph-transformer processor block (processor_gt.go) exchanges
//     halo nodes (block.py l.1148-1183, distributed/halo.py): the rows of
//     other GPUs that this GPU's edges read are sent by all-to-all and
//     appended to the layer-normed rows, key and value are projected over
//     those, query over this GPU's rows; each block caches its halo index
//     (edge_index_local [2, E_r] int64 and the send indices) on the device
//     for the whole run.
//
// memsh replays rank 0, which holds the largest shares.

// shardView is shard_tensor along dim 0 with rows of x's on this rank: a
// view. Its backward all-gathers the gradient, a tensor of x's size. The
// caller keeps x alive as long as the view is used.
func shardView(b *core.Builder, x core.Value, rows int64, why string) core.Value {
	i := b.AddOp("view", "shard_tensor", []core.Value{x})
	y := b.Out(i, b.LastName(x)+".shard", []int64{rows, b.Last(x)}, b.Dtype(x), why)
	b.Val(y).Bytes = 0
	b.Op(i).WorkB = b.Val(x).Bytes // _ShardParallelSection backward: the gathered gradient
	if b.Val(x).Grad {
		b.RecordComm("all_gather", "cp", b.Val(x).Bytes, true)
	}
	return y
}

// shardEdges is shard_edges_1hop on rank 0 of g for e destination-sorted
// edges into dAll destination rows: a view of the first E_r rows of the
// attributes and a copy of the first E_r columns of the index.
func shardEdges(b *core.Builder, ea, ei core.Value, e, dAll, g int64) (core.Value, core.Value, int64) {
	eR := ChunkEdges(e, dAll, g)[0]
	done := b.Scope("shard_edges")
	eaR := shardView(b, ea, eR, fmt.Sprintf("this GPU's %d of the %d edges' attributes (shard_tensor along dim 0: a view)", eR, e))
	eiR := b.Ew("copy", "edge_index", []core.Value{ei}, []int64{2, eR}, units.INT64,
		"this GPU's columns of the edge index (shard_tensor along dim 1: _split's .contiguous() copy)")
	b.Val(eiR).Grad = false
	done()
	return eaR, eiR, eR
}

// syncRows is sync_tensor with the gather in the forward: all n rows of
// x, a new tensor. Its backward all-reduces the gradient in fp32
// (_reduce(use_fp32=True): a float() copy and the .to(dtype) back) and
// keeps this rank's rows (a view).
func syncRows(b *core.Builder, x core.Value, n int64, why string) core.Value {
	i := b.AddOp("all_gather", "sync_tensor", []core.Value{x})
	y := b.Out(i, b.LastName(x)+".gathered", []int64{n, b.Last(x)}, b.Dtype(x), why)
	b.RecordComm("all_gather", "cp", b.Val(y).Bytes, false)
	b.RecordComm("all_reduce", "cp", units.FP32.Bytes(n*b.Last(x)), true)
	b.Op(i).WorkB = units.FP32.Bytes(n * b.Last(x))
	if b.Dtype(x) != units.FP32 {
		b.Op(i).WorkB += b.Val(y).Bytes
	}
	return y
}

// syncReduce is sync_tensor of rows that are whole on every GPU (no
// gather in the forward: a view): its backward still all-reduces the
// gradient in fp32 (graph.py l.227-253).
func syncReduce(b *core.Builder, x core.Value) core.Value {
	i := b.AddOp("view", "sync_tensor", []core.Value{x})
	y := b.Out(i, b.LastName(x)+".synced", b.Shape(x), b.Dtype(x), "sync_tensor without the gather: the same rows")
	b.Val(y).Bytes = 0
	n := core.Numel(b.Shape(x))
	b.Op(i).WorkB = units.FP32.Bytes(n)
	if b.Dtype(x) != units.FP32 {
		b.Op(i).WorkB += b.Dtype(x).Bytes(n)
	}
	if b.Val(x).Grad {
		b.RecordComm("all_reduce", "cp", units.FP32.Bytes(n), true)
	}
	return y
}

// dropUnconnected is _drop_unconnected_src_nodes (khop_edges.py
// l.474-500) keeping s of the n source rows of x read by the e edges of
// index ei: torch.unique of the sources (an int64 [s] index), x[index] (a
// copy), and the index relabelled in place through an int64 [n] map (a
// temporary [e] for the gathered labels).
func dropUnconnected(b *core.Builder, x, ei core.Value, s, n, e int64) core.Value {
	conn := index(b, "connected_src_nodes", s, "torch.unique(edge_index[0]): the source rows the edges read")
	y := gatherRows(b, "x_src", x, conn, s)
	b.Op(b.Val(y).Producer).WorkB = b.Val(storage(b, x)).Bytes // IndexBackward: zeros of x's size
	relabel := b.AddOp("index_put_", "relabel_src", []core.Value{ei, conn})
	b.Op(relabel).WorkF = units.INT64.Bytes(n + e) // relabel_map and relabel_map[edge_index[0]]
	return y
}

// haloNodes estimates the halo of rank 0 of g over a mesh's processor
// edges: the other ranks' nodes its edges read. anemoi-graphs orders a
// mesh's nodes by latitude (generate/utils.py get_coordinates_ordering,
// used by TriNodes: tri_icosahedron.py l.51), so each rank holds a
// latitude band and its halo lies along one boundary (two for an inner
// rank: memsh takes two when g > 2, the worst rank). On a boundary of
// length L at most the equator's 2π (unit sphere), the nodes within one
// edge of it on the other side are (M / 4π) × L × d for M nodes a
// distance d apart (a triangular lattice: d = sqrt(8π / (√3 M))); the
// multi-scale edges' coarser levels, each with half the nodes per unit of
// boundary and twice the reach, add at most as many again: 2 × M × d / 2
// per boundary. An estimate, capped by the other ranks' nodes; 771 nodes
// per boundary on TriNodes(6) (40,962 nodes), 4 % of a rank's 20,481.
func haloNodes(nodes, g int64) int64 {
	if g <= 1 {
		return 0
	}
	boundaries := int64(1)
	if g > 2 {
		boundaries = 2
	}
	m := float64(nodes)
	d := math.Sqrt(8 * math.Pi / (math.Sqrt(3) * m))
	h := int64(math.Ceil(float64(boundaries) * m * d))
	return min(h, nodes-localRows(nodes, g))
}

// haloExchange is halo_exchange (distributed/primitives.py l.422-460) of
// this rank's r rows x with h halo rows: x[send_indices] copies for the
// peers (about h rows: the graph is symmetric), the received rows, and
// torch.cat([x] + received): a new [r + h, C] tensor. The backward
// clones the local gradient, sends the halo rows' back and index_adds
// what it receives (primitives.py l.463-520).
func haloExchange(b *core.Builder, x core.Value, h int64) core.Value {
	r, c, dt := core.Rows(b.Shape(x)), b.Last(x), b.Dtype(x)
	i := b.AddOp("all_to_all", "halo_exchange", []core.Value{x})
	y := b.Out(i, "x_plus_halo", []int64{r + h, c}, dt,
		fmt.Sprintf("this GPU's %d rows and %d halo rows of the other GPUs (halo_exchange: all-to-all, torch.cat)", r, h))
	b.Op(i).WorkF = dt.Bytes(2 * h * c)     // the send copies and the received rows until the cat
	b.Op(i).WorkB = dt.Bytes((r + 3*h) * c) // grad_local clone, halo grads sent, received, cat
	b.RecordComm("all_to_all", "cp", dt.Bytes(h*c), false)
	b.RecordComm("all_to_all", "cp", dt.Bytes(h*c), true)
	return y
}
