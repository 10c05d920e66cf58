package graph

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The mapper of anemoi-models 0.9.0 to 0.15 (PR #406, "Checkpointed
// Mapper Chunking"; GraphTransformerBaseMapper with shard_strategy
// "edges", the default: layers/mapper.py@models-0.9.0 l.296-433; from
// 0.16.0 its chunks are slices of a GraphPartition: mapper_partitioned.go).
// _run_mapper no longer checkpoints the whole mapper
// (models/encoder_processor_decoder.py@models-0.9.0 l.316):
//
//  1. pre_process_edge_sharding_wrapper, under one checkpoint: the batch's
//     edge attributes and index (edge_inputs.go), and
//     drop_unconnected_src_nodes over the whole graph: a copy of the
//     connected source rows (every source node, an assumption exact when
//     every source node has an edge) and a relabelled edge index;
//  2. num_chunks = max(num_chunks, ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER), in
//     training and in eval alike: the destination nodes split into that
//     many ranges (tensor_split), each run under a checkpoint of its own
//     (run_processor_chunk_edge_sharding): bipartite_subgraph copies the
//     chunk's edge index and attributes, drop_unconnected_src_nodes its
//     source rows (at most one per edge: memsh counts min(sources, chunk
//     edges), an upper bound), x_dst[dst_chunk] its destination rows; then
//     pre_process (the node embeddings), the block over the chunk (no edge
//     chunking inside: num_chunks=1, block.py@models-0.9.0 l.707) and
//     post_process (the decoder's node_data_extractor);
//  3. each chunk's result .to(autocast dtype) is written into out_dst =
//     torch.empty([destination rows, out channels]) (the encoder's C, the
//     decoder's output variables), so no tensor of the mapper spans all
//     destination rows but that buffer, and the backward recomputes one
//     chunk at a time.
//
// Model sharding of this mapper (edge sharding over the model's GPUs) is
// not simulated (CheckLayout).

// chunkedMapper reports whether g chunks its destination nodes, as
// anemoi-models 0.9.0 and later do.
func (g *GraphTransformer) chunkedMapper() bool { return g.Version.Chunked() }

// lowerChunked lowers mapper_forward_with_edge_sharding on one GPU for
// source features xs and destination features xd of batch samples.
func (g *GraphTransformer) lowerChunked(b *core.Builder, xs, xd core.Value, batch int64) core.Value {
	k := max(g.Chunks, g.EvalChunks) // mapper.py@models-0.9.0 l.410: max(self.num_chunks, NUM_CHUNKS_INFERENCE_MAPPER)
	region := func() func() {
		if !g.Checkpoint {
			return func() {}
		}
		return b.BeginNestedRegion("") // nested in a checkpoint(modules=[...]) around the mapper, else its own
	}
	rAll, sAll := batch*g.Edges.Dst.Nodes, batch*g.Edges.Src.Nodes
	// 1. The edges and the connected source rows, under one checkpoint.
	end := region()
	done := b.Scope("pre_process")
	ea, ei, e := g.edges().lower(b, batch)
	conn := index(b, "connected_src_nodes", sAll, "torch.unique(edge_index[0]): the connected source nodes")
	xs = gatherRows(b, "x_src", xs, conn, sAll)
	ei = b.Ew("index", "edge_index_relabelled", []core.Value{ei, conn}, []int64{2, e}, units.INT64,
		"edge index relabelled to the connected source nodes (drop_unconnected_src_nodes' bipartite_subgraph)")
	b.Val(ei).Grad = false
	done()
	end()
	out, outType := g.outDst(b, xd, rAll)
	// dst_chunks = torch.arange(rows).tensor_split(num_chunks): views of one index.
	dst := index(b, "dst_nodes", rAll, "torch.arange over the destination rows, split into the chunks' ranges")
	edgeCounts := ChunkEdges(e, rAll, k)
	var chunks core.SharedCalls // one block and one set of embeddings serve every chunk
	for i, r := range splitRows(rAll, k) {
		chunks.Begin(b)
		ek := edgeCounts[i]
		sk := min(sAll, ek) // at most one connected source per edge
		done := b.Scope(chunkScope(int64(i), k))
		end := region()
		// bipartite_subgraph: the chunk's edges, copied.
		sub := b.AddOp("index", "bipartite_subgraph", []core.Value{ea, ei})
		eaK := b.Out(sub, "edge_attr", []int64{ek, g.EdgeAttrs}, b.Dtype(ea), "edge attributes of the chunk's edges (bipartite_subgraph copy)")
		eiK := b.Out(sub, "edge_index", []int64{2, ek}, units.INT64, "edge index of the chunk's edges (bipartite_subgraph copy)")
		b.Val(eiK).Grad = false
		b.Op(sub).WorkF = sAll + rAll + e // bool node and edge masks
		b.Op(sub).WorkB = b.Val(ea).Bytes // IndexBackward: a zero tensor of the attributes' size
		connK := index(b, "connected_src_nodes", sk, "the chunk's connected source nodes (drop_unconnected_src_nodes)")
		eiK = b.Ew("index", "edge_index_relabelled", []core.Value{eiK, connK}, []int64{2, ek}, units.INT64, "the chunk's edge index relabelled to its source rows")
		b.Val(eiK).Grad = false
		xsK := gatherRows(b, "x_src", xs, connK, sk)
		xdK := gatherRows(b, "x_dst", xd, dst, r) // x_dst[dst_chunk]
		var y core.Value
		xsK, y = g.chunkBlock(b, xsK, xdK, eaK, eiK, ek, r, sk, outType)
		b.KeepAlive("chunk_locals", eaK, eiK, xsK)
		end()
		// out_dst[dst_chunk] = ...: index_put_ in place; its backward gathers the gradient's rows.
		put := b.AddOp("index_put_", "out_dst_write", []core.Value{out, y, dst})
		b.Op(put).WorkB = b.Val(y).Bytes
		done()
		chunks.End(b)
	}
	b.KeepAlive("mapper_locals", ea, ei, xs)
	return out
}

// outDst is out_dst, the tensor every chunk of a chunked mapper writes its
// rows into (torch.empty in the autocast dtype), and that dtype.
func (g *GraphTransformer) outDst(b *core.Builder, xd core.Value, rows int64) (core.Value, units.DType) {
	outC := g.Channels
	if g.Role == "decoder" {
		outC = g.Out
	}
	outType := b.Dtype(xd)
	if b.Prec.Autocast {
		outType = b.Prec.Compute
	}
	out := b.Ew("empty", "out_dst", nil, []int64{rows, outC}, outType,
		fmt.Sprintf("out_dst = torch.empty([%d, %d]) in the autocast dtype: every chunk's result is written into it", rows, outC))
	return out, outType
}

// chunkBlock is one chunk of a chunked mapper past its inputs: the node
// embeddings (the encoder's source rows too), the graph-transformer block
// over ek edges into r destination rows from sk source rows, the decoder's
// node_data_extractor, and the cast for out_dst. It returns the embedded
// source rows, which the chunk keeps alive, and the result.
func (g *GraphTransformer) chunkBlock(b *core.Builder, xsK, xdK, eaK, eiK core.Value, ek, r, sk int64, outType units.DType) (core.Value, core.Value) {
	c := g.Channels
	if g.Role == "encoder" {
		xsK = b.Linear("emb_nodes_src", core.RoleEmbed, xsK, g.SrcIn, c, true)
	}
	xdK = b.Linear("emb_nodes_dst", core.RoleEmbed, xdK, g.DstIn, c, true)
	y := g.block(b, xsK, xdK, eaK, eiK, 1, ek, r, sk, false)
	if g.Role == "decoder" {
		d := b.Scope("node_data_extractor")
		y = b.LayerNorm("0", y, c, true)
		y = b.Linear("1", "head", y, c, g.Out, true)
		d()
	}
	return xsK, b.Cast(y, outType, "chunk result .to(autocast dtype) for out_dst")
}

// index is an int64 index tensor of n entries (no gradient).
func index(b *core.Builder, name string, n int64, why string) core.Value {
	v := b.Ew("index", name, nil, []int64{n}, units.INT64, why)
	b.Val(v).Grad = false
	return v
}
