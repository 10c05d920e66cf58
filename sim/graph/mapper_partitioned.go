package graph

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The mapper of anemoi-models 0.16.0 and later (PR #1102, "graph
// partitioning"; GraphTransformerBaseMapper.mapper_forward_with_edge_sharding,
// layers/mapper.py@models-0.18.0 l.248-386, distributed/khop_edges.py
// l.51-189 and l.317-409, ecmwf/anemoi-core c3c7a893), on one GPU or on
// each of the model's G GPUs (shard_edges.go), after the graph provider's
// get_edges, under a checkpoint of its own:
//
//  1. prepare_edge_sharding_wrapper, under one checkpoint: on G GPUs,
//     shard_graph_to_local shards the destination rows if they are whole
//     (a view), clones this GPU's edge index, gathers the source rows if
//     they are sharded (sync_tensor) and keeps those its edges read
//     (_drop_unconnected_src_nodes: a copy; bandSources estimates how
//     many); on one GPU it
//     returns its inputs. build_graph_partition then splits the
//     destination rows into max(chunks, eval chunks) ranges (an int64
//     degree per destination row, transient);
//  2. out_dst = torch.empty([destination rows, out channels]) in the
//     autocast dtype;
//  3. each chunk under a checkpoint of its own (run_processor_chunk):
//     GraphPartition.materialise slices the chunk's edge attributes (a
//     view: the edges are sorted by destination) and destination rows (a
//     view), clones its edge index and relabels it in place, and
//     _drop_unconnected_src_nodes copies the source rows its edges read
//     (bandSources); then pre_process, the
//     block with no edge chunking inside, post_process, and the result
//     .to(out dtype) written into out_dst;
//  4. on G GPUs the decoder gathers out_dst (gather_tensor) unless the
//     batch is kept sharded; the encoder keeps its output sharded for the
//     processor.
type mapperShards struct {
	g          int64 // the model's GPUs
	srcSharded bool  // the source rows come sharded (sync_tensor gathers them)
	dstSharded bool  // the destination rows come sharded (else shard_tensor views them)
	keepDst    bool  // keep_x_dst_sharded: no gather of the output
}

// shardsOf is how g's mapper receives and returns its rows on b's GPUs:
// the encoder reads the grid (sharded with keep_batch_sharded) and the
// hidden nodes (sharded) and keeps its output sharded; the decoder reads
// the processor's sharded rows and the grid, and keeps its output sharded
// with keep_batch_sharded (encoder_processor_decoder.py@models-0.18.0
// l.253-324).
func (g *GraphTransformer) shardsOf(b *core.Builder) mapperShards {
	n := shards(b)
	if n == 1 || !g.Version.EdgeSharded() {
		return mapperShards{g: 1}
	}
	if g.Role == "encoder" {
		return mapperShards{g: n, srcSharded: g.KeepBatchSharded, dstSharded: true, keepDst: true}
	}
	return mapperShards{g: n, srcSharded: true, dstSharded: g.KeepBatchSharded, keepDst: g.KeepBatchSharded}
}

// lowerPartitioned lowers the mapper for source features xs and
// destination features xd as this GPU holds them, of batch samples.
func (g *GraphTransformer) lowerPartitioned(b *core.Builder, xs, xd core.Value, batch int64) core.Value {
	k := max(g.Chunks, g.EvalChunks) // mapper.py@models-0.18.0 l.290
	sh := g.shardsOf(b)
	region := func() func() {
		if !g.Checkpoint {
			return func() {}
		}
		return b.BeginNestedRegion("")
	}
	sAll, dAll := batch*g.Edges.Src.Nodes, batch*g.Edges.Dst.Nodes
	dR := localRows(dAll, sh.g) // this GPU's destination rows
	// The graph provider's edges, this GPU's share of them on G GPUs,
	// under a checkpoint of their own (StaticGraphProvider.get_edges,
	// act_checkpoint=True: graph_provider.py@models-0.18.0 l.256-291): the
	// backward makes them again for the trainable attributes' gradient.
	endEdges := b.BeginNestedRegion("")
	ea, ei, e := g.edges().lower(b, batch)
	eaAll := ea
	if sh.g > 1 {
		ea, ei, e = shardEdges(b, ea, ei, e, dAll, sh.g)
	}
	endEdges()
	// 1. prepare_edge_sharding_wrapper, under one checkpoint.
	end := region()
	done := b.Scope("pre_process")
	sRows := sAll // the source rows the chunks index
	if sh.g > 1 {
		if !sh.dstSharded {
			xd = shardView(b, xd, dR, "this GPU's destination rows (shard_graph_to_local's shard_tensor: a view)")
		}
		ei = b.Ew("clone", "edge_index_local", []core.Value{ei}, []int64{2, e}, units.INT64,
			"this GPU's edge index, cloned and relabelled to its destination rows (shard_graph_to_local)")
		b.Val(ei).Grad = false
		if sh.srcSharded {
			xs = syncRows(b, xs, sAll, fmt.Sprintf("all %d source rows of the model's GPUs (sync_tensor all-gather)", sAll))
		} else {
			xs = syncReduce(b, xs)
		}
		sRows = g.bandSources(sAll, dAll, 0, dR, e)
		xs = dropUnconnected(b, xs, ei, sRows, sAll, e)
	}
	deg := b.AddOp("degree", "build_graph_partition", []core.Value{ei})
	b.Op(deg).WorkF = units.INT64.Bytes(dR) // degree(edge_index[1]) per destination row
	done()
	end()
	out, outType := g.outDst(b, xd, dR)
	edgeCounts := ChunkEdges(e, dR, k)
	var chunks core.SharedCalls // one block and one set of embeddings serve every chunk
	var start int64             // the chunk's first destination row
	for i, r := range splitRows(dR, k) {
		chunks.Begin(b)
		ek := edgeCounts[i]
		sk := min(sRows, g.bandSources(sAll, dAll, start, r, ek))
		start += r
		done := b.Scope(chunkScope(int64(i), k))
		end := region()
		// GraphPartition.materialise: slices of the destination-sorted edges and rows.
		eaK := viewRows(b, ea, ek, "edge attributes of the chunk's edges (edge_attr[edge_range]: a view)")
		b.Op(b.Val(eaK).Producer).WorkB = b.Val(storage(b, ea)).Bytes // SliceBackward: a gradient of the whole tensor
		eiK := b.Ew("clone", "edge_index", []core.Value{ei}, []int64{2, ek}, units.INT64,
			"edge index of the chunk's edges (edge_index[:, edge_range].clone()), relabelled in place")
		b.Val(eiK).Grad = false
		xdK := viewRows(b, xd, r, "the chunk's destination rows (x_dst[dst_range]: a view)")
		b.Op(b.Val(xdK).Producer).WorkB = b.Val(storage(b, xd)).Bytes
		xsK := dropUnconnected(b, xs, eiK, sk, sRows, ek)
		var y core.Value
		xsK, y = g.chunkBlock(b, xsK, xdK, eaK, eiK, ek, r, sk, outType)
		b.KeepAlive("chunk_locals", eiK, xsK)
		end()
		// out_dst[dst_range] = ...: a copy into a slice; its backward slices the gradient.
		put := b.AddOp("index_put_", "out_dst_write", []core.Value{out, y})
		b.Op(put).WorkB = b.Val(y).Bytes
		done()
		chunks.End(b)
	}
	b.KeepAlive("mapper_locals", eaAll, ea, ei, xs, xd)
	if sh.g > 1 && !sh.keepDst {
		out = gatherAllRows(b, out, dAll, "the decoder's output rows of every GPU of the model (gather_tensor)")
	}
	return out
}

// storage is the tensor whose memory v is: v, or the tensor the views v
// was taken from were taken of.
func storage(b *core.Builder, v core.Value) core.Value {
	for {
		base := baseTensor(b, v)
		if base == core.NoValue {
			return v
		}
		v = base
	}
}

// bandSources estimates the source rows that the e edges into the
// destination rows [start, start+r) of all dAll read, out of all sAll.
// anemoi-graphs orders a mesh's nodes by latitude (shard_edges.go) and a
// dataset's grid comes in latitude rows, so a range of destination rows
// is a latitude band. With both node sets uniform on the sphere, the
// band's edges read the sources in the band, sAll x r / dAll, and along
// each of its boundaries (a range that starts after row 0 or ends before
// dAll) those within the edges' reach ρ across it: k sources lie within ρ
// of a node (k = edges per destination; S / 4π per steradian, so k = S
// ρ² / 4, ρ = 2 sqrt(k / S)), and a boundary at most the equator's 2π
// long has S / 4π x 2π x ρ = sqrt(k S) sources within ρ (S: one sample's
// source nodes). An estimate, capped by the sources and by one source
// per edge; a stretched grid or mesh (regional and global parts, not
// uniform) takes the cap alone, an upper bound.
func (g *GraphTransformer) bandSources(sAll, dAll, start, r, e int64) int64 {
	bound := min(sAll, e)
	if g.Edges.Src.Regional > 0 || g.Edges.Dst.Regional > 0 || dAll <= 0 {
		return bound
	}
	var boundaries float64
	if start > 0 {
		boundaries++
	}
	if start+r < dAll {
		boundaries++
	}
	s := float64(g.Edges.Src.Nodes)
	est := float64(sAll)*float64(r)/float64(dAll) + boundaries*math.Sqrt(g.Edges.PerDst*s)
	return min(bound, int64(math.Ceil(est)))
}
