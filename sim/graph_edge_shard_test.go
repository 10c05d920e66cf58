package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/hw"
)

// edgeShardPlan is a small anemoi-models 0.18.0 model (64 grid points,
// 100 mesh nodes, C = 8, H = 2, fp32, PyG's message passing, no trainable
// attributes, no noise): encoder knn 4 (400 edges), a one-layer
// graph-transformer processor over 400 estimated multi-scale edges,
// decoder knn 2 (128 edges), both mappers in 2 chunks, on cp GPUs per
// model with keep_batch_sharded.
func edgeShardPlan(t *testing.T, cp int64, keep bool) *core.Plan {
	t.Helper()
	grid, _ := graph.Grid("g", 64)
	mesh, _ := graph.Mesh("m", 100)
	enc, _ := graph.KNNEdges(grid, mesh, 4)
	dec, _ := graph.KNNEdges(mesh, grid, 2)
	ms, _ := graph.MultiscaleEdges(mesh, 4)
	mapper := func(e *graph.EdgeSet) *graph.GraphTransformer {
		return &graph.GraphTransformer{Edges: e, Channels: 8, Heads: 2, MLPRatio: 4, EdgeAttrs: 3, Chunks: 2, EvalChunks: 1, Checkpoint: true, Backend: graph.BackendPyG}
	}
	proc := &graph.GraphTransformerProcessor{Edges: ms, Layers: 1, Channels: 8, Heads: 2, MLPRatio: 4, EdgeAttrs: 3, Segments: 1, EvalChunks: 1, Backend: graph.BackendPyG}
	epd, err := graph.NewEncoderProcessorDecoder(graph.EncoderProcessorDecoder{Name: "tiny", Grid: grid, Mesh: mesh,
		Encoder: mapper(enc), Processor: proc, Decoder: mapper(dec), Inputs: 16, Outputs: 4,
		Version: graph.CurrentVersion(), KeepBatchSharded: keep})
	if err != nil {
		t.Fatal(err)
	}
	prec, _ := core.LookupPrecision("fp32")
	rt, _ := core.LookupRuntime("cuda")
	dev, _ := hw.LookupDevice("H100")
	p := &core.Plan{Model: graph.NewGraphModel(epd, "mse"), Batch: 1, Seq: 1, GradAccum: 1, Members: 1,
		Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Phase: core.Train, Runtime: rt}
	if cp > 1 {
		p.Parallel = core.Parallelism{CP: cp, CPMode: "ulysses"}
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// valueBytes lists the bytes of the program's values by name, in order.
func valueBytes(prog *core.Program) map[string][]int64 {
	out := map[string][]int64{}
	for _, v := range prog.Values {
		out[v.Name] = append(out[v.Name], v.Bytes)
	}
	return out
}

// valueWant is a value's name and the bytes of each value of that name,
// in order (nil: no such value).
type valueWant struct {
	name string
	want []int64
}

// checkValueBytes fails t for each of wants whose bytes in got differ.
func checkValueBytes(t *testing.T, got map[string][]int64, wants []valueWant) {
	t.Helper()
	for _, c := range wants {
		if !slices.Equal(got[c.name], c.want) {
			t.Errorf("%s: %v bytes, want %v", c.name, got[c.name], c.want)
		}
	}
}

// TestEdgeSharding counts by hand what rank 0 of 2 GPUs per model holds
// under anemoi-models 0.18.0's edge sharding (sim/graph/shard_edges.go,
// mapper_partitioned.go), edgeShardPlan with keep_batch_sharded: N = 64
// grid points, M = 100 mesh nodes, C = 8, fp32 (4 B), int64 index (8 B),
// x_data_latent 16 inputs + 4 coordinates = 20 columns. Every GPU holds
// the first of tensor_split's shares: 32 grid rows, 50 mesh rows.
//
// Model: the batch's rows of this GPU, inputs [1, 32, 16] = 2,048 B; the
// grid attributes [64, 4] = 1,024 B, viewed [32, 4]; x_data_latent [32,
// 20] = 2,560 B; the hidden attributes [100, 4] = 1,600 B, viewed [50, 4].
//
// Encoder (knn 4 per mesh node: E = 400, destination-sorted): the
// provider's attributes [400, 3] = 4,800 B and index [2, 400] = 6,400 B;
// this GPU's E_r = 4 x 50 = 200 edges: a view of the attributes, a copy
// of the index [2, 200] = 3,200 B. Preparation: the index cloned (3,200
// B), x_data_latent gathered from both GPUs [64, 20] = 5,120 B, the
// sources the 200 edges read (GraphTransformer.bandSources: the band's
// 64 x 50 / 100 = 32, plus sqrt(k S) = sqrt(4 x 64) = 16 across its one
// boundary: 48; int64 [48] = 384 B, the rows [48, 20] = 3,840 B);
// out_dst [50, 8] = 1,600 B. Chunk 0 of 2: 25 rows, 100 edges: the index
// cloned [2, 100] = 1,600 B, 64 x 25 / 100 + 16 = 32 source rows (256 B,
// [32, 20] = 2,560 B), embedded [32, 8] = 1,024 B, the destination rows
// embedded [25, 8] = 800 B, the scatter [25, 8] = 800 B.
//
// Processor (400 edges estimated, 4 per node): its E_r = 200 edges as the
// encoder's (4,800, 6,400 and 3,200 B); the halo of rank 0, ceil(sqrt(8π
// x 100 / √3)) = ceil(38.09) = 39 nodes (fewer than the other GPU's 50):
// the layer-normed rows and the halo [89, 8] = 2,848 B, key and value
// over them (2,848 B each), query over this GPU's [50, 8] = 1,600 B, the
// edges projected [200, 8] = 6,400 B, the scatter [50, 8] = 1,600 B; the
// block caches its halo index, [2, 200] int64 and [39] int64, for the run.
//
// Decoder (knn 2 per grid point: E = 128): attributes [128, 3] = 1,536 B,
// index [2, 128] = 2,048 B, E_r = 2 x 32 = 64 (index copy 1,024 B, clone
// 1,024 B); the processor's rows gathered [100, 8] = 3,200 B, of which
// 100 x 32 / 64 + sqrt(2 x 100) = 64.1 are read, capped at one per edge:
// 64 (512 B, [64, 8] = 2,048 B); out_dst [32, 4] = 512 B. Chunk 0: 16
// rows, 32 edges: clone [2, 32] = 512 B, 100 x 16 / 64 + 14.1 = 39.1
// sources capped at its 32 edges (256 B, [32, 8] = 1,024 B), the destination rows embedded [16,
// 8] = 512 B, the scatter [16, 8] = 512 B, the output head [16, 4] = 256
// B. The output stays sharded: y_pred [1, 32, 4] = 512 B.
func TestEdgeSharding(t *testing.T) {
	prog, err := edgeShardPlan(t, 2, true).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	got := valueBytes(prog)
	checkValueBytes(t, got, []valueWant{
		{"inputs", []int64{2_048}},
		{"node_attributes.data.attributes", []int64{1_024}},
		{"x_data_latent", []int64{2_560}},
		{"node_attributes.hidden.attributes", []int64{1_600}},
		{"encoder.trainable.edge_attr", []int64{4_800}},
		{"encoder.edge_index", []int64{6_400}},
		{"encoder.shard_edges.edge_attr.shard", []int64{0}},
		{"encoder.shard_edges.edge_index", []int64{3_200}},
		{"encoder.pre_process.edge_index_local", []int64{3_200}},
		{"encoder.pre_process.x_data_latent.gathered", []int64{5_120}},
		{"encoder.pre_process.connected_src_nodes", []int64{384}},
		{"encoder.pre_process.x_src", []int64{3_840}},
		{"encoder.out_dst", []int64{1_600}},
		{"encoder.chunk0.edge_index", []int64{1_600}},
		{"encoder.chunk0.connected_src_nodes", []int64{256}},
		{"encoder.chunk0.x_src", []int64{2_560}},
		{"encoder.chunk0.emb_nodes_src.out", []int64{1_024}},
		{"encoder.chunk0.emb_nodes_dst.out", []int64{800}},
		{"encoder.chunk0.proc.conv.scatter_out", []int64{800}},
		{"processor.trainable.edge_attr", []int64{4_800}},
		{"processor.shard_edges.edge_index", []int64{3_200}},
		{"processor.proc.0.blocks.0.x_plus_halo", []int64{2_848}},
		{"processor.proc.0.blocks.0.lin_key.out", []int64{2_848}},
		{"processor.proc.0.blocks.0.lin_value.out", []int64{2_848}},
		{"processor.proc.0.blocks.0.lin_query.out", []int64{1_600}},
		{"processor.proc.0.blocks.0.lin_edge.out", []int64{6_400}},
		{"processor.proc.0.blocks.0.conv.scatter_out", []int64{1_600}},
		{"decoder.trainable.edge_attr", []int64{1_536}},
		{"decoder.edge_index", []int64{2_048}},
		{"decoder.shard_edges.edge_index", []int64{1_024}},
		{"decoder.pre_process.edge_index_local", []int64{1_024}},
		{"decoder.pre_process.x_latent_proc.gathered", []int64{3_200}},
		{"decoder.pre_process.connected_src_nodes", []int64{512}},
		{"decoder.pre_process.x_src", []int64{2_048}},
		{"decoder.out_dst", []int64{512}},
		{"decoder.chunk0.edge_index", []int64{512}},
		{"decoder.chunk0.connected_src_nodes", []int64{256}},
		{"decoder.chunk0.x_src", []int64{1_024}},
		{"decoder.chunk0.emb_nodes_dst.out", []int64{512}},
		{"decoder.chunk0.proc.conv.scatter_out", []int64{512}},
		{"decoder.chunk0.node_data_extractor.1.out", []int64{256}},
		{"y_pred", []int64{512}},
	})
	// No gather of the decoder's output: the batch stays sharded.
	for name := range got {
		if strings.HasSuffix(name, "out_dst.gathered") {
			t.Errorf("%s: the decoder gathers its output with keep_batch_sharded", name)
		}
	}
	var halo []string
	for _, b := range prog.Buffers {
		if strings.Contains(b.Name, "halo_info") {
			halo = append(halo, fmt.Sprintf("%s %s %v", b.Name, b.Dtype.Name(), b.Shape))
		}
	}
	want := []string{"processor.proc.0.blocks.0.halo_info.edge_index_local int64 [2 200]", "processor.proc.0.blocks.0.halo_info.send_indices int64 [39]"}
	if !slices.Equal(halo, want) {
		t.Errorf("halo buffers %q, want %q", halo, want)
	}
	// The collectives of the forward, by hand: x_data_latent gathered
	// (5,120 B), the halo rows to the other GPU ([39, 8] fp32 = 1,248 B),
	// the processor's rows gathered for the decoder (3,200 B).
	var fwd []string
	for _, c := range prog.Comm {
		if !c.Backward {
			fwd = append(fwd, fmt.Sprintf("%s %d", c.Kind, c.Bytes))
		}
	}
	if want := []string{"all_gather 5120", "all_to_all 1248", "all_gather 3200"}; !slices.Equal(fwd, want) {
		t.Errorf("forward collectives %q, want %q", fwd, want)
	}
}

// TestEdgeShardingBatchGathered: with keep_batch_sharded=False each GPU
// reads the whole grid (inputs [1, 64, 16] = 4,096 B, x_data_latent [64,
// 20] = 5,120 B, not gathered by the encoder, whose sync_tensor still
// all-reduces its gradient), the decoder views its 32
// destination rows and gathers its output, [64, 4] = 1,024 B, and the
// model returns all 64 points ([1, 64, 4] = 1,024 B).
func TestEdgeShardingBatchGathered(t *testing.T) {
	prog, err := edgeShardPlan(t, 2, false).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	got := valueBytes(prog)
	checkValueBytes(t, got, []valueWant{
		{"inputs", []int64{4_096}},
		{"x_data_latent", []int64{5_120}},
		{"encoder.pre_process.x_data_latent.gathered", nil},
		{"encoder.pre_process.x_data_latent.synced", []int64{0}}, // sync_tensor: no gather, an all-reduce in the backward
		{"decoder.pre_process.x_data_latent.shard", []int64{0}},
		{"decoder.out_dst.gathered", []int64{1_024}},
		{"y_pred", []int64{1_024}},
	})
}

// TestEdgeShardingOneGPU: the same model on one GPU shards nothing: all
// 400 encoder edges in 2 chunks of 200 (clones [2, 200] = 3,200 B), 64 x
// 50 / 100 + sqrt(4 x 64) = 48 source rows each ([48, 20] = 3,840 B), no
// preparation copy, no halo;
// and it keeps more than a GPU of two: the peak falls with the GPUs.
func TestEdgeShardingOneGPU(t *testing.T) {
	prog, err := edgeShardPlan(t, 1, true).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	got := valueBytes(prog)
	checkValueBytes(t, got, []valueWant{
		{"inputs", []int64{4_096}},
		{"encoder.chunk0.edge_index", []int64{3_200}},
		{"encoder.chunk0.x_src", []int64{3_840}},
		{"encoder.pre_process.x_src", nil},
		{"processor.proc.0.blocks.0.x_plus_halo", nil},
		{"processor.proc.0.blocks.0.lin_key.out", []int64{3_200}},
	})
	// The graph provider keeps the permutation that sorted each graph's
	// edges by destination: int64 [400] for the encoder and the processor,
	// [128] for the decoder.
	var perms []string
	for _, b := range prog.Buffers {
		if strings.HasSuffix(b.Name, ".perm") {
			perms = append(perms, fmt.Sprintf("%s %v", b.Name, b.Shape))
		}
	}
	if want := []string{"encoder.perm [400]", "processor.perm [400]", "decoder.perm [128]"}; !slices.Equal(perms, want) {
		t.Errorf("perm buffers %q, want %q", perms, want)
	}
	one, err := Evaluate(edgeShardPlan(t, 1, true), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	two, err := Evaluate(edgeShardPlan(t, 2, true), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if two.PeakAllocated >= one.PeakAllocated {
		t.Errorf("peak on each of 2 GPUs %d B, on one GPU %d B: sharding should lower it", two.PeakAllocated, one.PeakAllocated)
	}
}

// TestEdgeShardingLayout: anemoi-models 0.17.0 and later shard edges, so
// no head count needs dividing by the GPUs (0.8.1's head sharding does);
// model sharding still runs one sample per GPU and is spelled
// cp_mode="ulysses".
func TestEdgeShardingLayout(t *testing.T) {
	p := edgeShardPlan(t, 1, true)
	p.Parallel = core.Parallelism{CP: 4, CPMode: "ulysses"} // 4 GPUs, 2 heads
	if err := p.Validate(); err != nil {
		t.Errorf("cp=4 over 2 heads with edge sharding: %v", err)
	}
	p.Parallel = core.Parallelism{CP: 2}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "(num_gpus_per_model), which splits nodes and edges") {
		t.Errorf("cp=2 without cp_mode: %v, want the hint", err)
	}
}
