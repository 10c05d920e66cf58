package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
)

// chunkedPlan is tinyGraphPlan (two stacked members, fp32) as
// anemoi-models 0.18.0 runs it with PyG's message passing, with the
// mappers' chunks and eval chunks.
func chunkedPlan(t *testing.T, chunks, evalChunks int64, phase core.Phase) *core.Plan {
	t.Helper()
	return chunkedPlanWith(t, chunks, evalChunks, phase, graph.BackendPyG)
}

// chunkedPlanWith is chunkedPlan with the mappers' attention backend.
func chunkedPlanWith(t *testing.T, chunks, evalChunks int64, phase core.Phase, backend string) *core.Plan {
	t.Helper()
	return chunkedPlanAt(t, graph.CurrentVersion(), chunks, evalChunks, phase, backend)
}

// chunkedPlanAt is chunkedPlanWith as anemoi-models release v runs it.
func chunkedPlanAt(t *testing.T, v graph.Version, chunks, evalChunks int64, phase core.Phase, backend string) *core.Plan {
	t.Helper()
	p := tinyGraphPlan(t, 2, "stacked", "fp32")
	epd := *p.Model.Layers[0].(*graph.EncoderProcessorDecoder)
	epd.Version = v
	for _, m := range []**graph.GraphTransformer{&epd.Encoder, &epd.Decoder} {
		g := **m
		g.Chunks, g.EvalChunks, g.Backend = chunks, evalChunks, backend
		*m = &g
	}
	e, err := graph.NewEncoderProcessorDecoder(epd)
	if err != nil {
		t.Fatal(err)
	}
	p.Model = graph.NewGraphModel(e, "crps")
	p.Phase = phase
	return p
}

// The mappers of anemoi-models 0.9.0 and later (PR #406;
// layers/mapper.py@models-0.9.0 l.343-433, and from 0.16.0 PR #1102's
// GraphPartition, mapper.py@models-0.18.0 l.248-386), counted by hand on
// tinyGraphPlan's decoder with two stacked members (R = 2 x 64 grid rows,
// S = 2 x 10 mesh rows, knn 2: E = 256 edges, C = 8, H = 2, 4 outputs,
// fp32) split into K = 4 destination chunks (R/K = 32 rows, E/K = 64
// edges each):
//
//   - each chunk's conv scatters into an fp32 [32, 8] (1,024 B) over its
//     own rows, not over all 128: 4 of them per pass;
//   - 0.9.0 to 0.15: each chunk copies its edges (bipartite_subgraph:
//     attributes [64, 3] fp32, 768 B; index [2, 64] int64, 1,024 B) and
//     gathers its source rows, at most one per edge: min(20, 64) = 20 rows
//     of the latent, [20, 8] fp32 (640 B), after
//     drop_unconnected_src_nodes' copy of all 20 rows for the whole graph;
//   - 0.16.0 on: the chunk's attributes are a slice of the
//     destination-sorted edges (a view, "rows"), its index a clone ([2,
//     64] int64, 1,024 B), its source rows a copy, and on one GPU nothing
//     is copied for the whole graph. The sources a band of destination
//     rows reads are estimated (GraphTransformer.bandSources): 20 x 32 /
//     128 = 5 in the band, plus sqrt(k S) = sqrt(2 x 10) = 4.47 across
//     each boundary: the first and last chunks have one, 9.47 -> 10 rows
//     ([10, 8] fp32, 320 B), the middle ones two, 13.94 -> 14 (448 B);
//   - out_dst, the only tensor over all 128 destination rows, is [128, 4]
//     fp32 (the decoder's output variables, 2,048 B);
//   - a checkpoint per chunk and one for the edges' preparation, and from
//     0.16.0 one around the graph provider's get_edges: 6 regions for the
//     decoder, whose chunks share one block's parameters;
//   - the chunk count is max(chunks, eval_chunks) in training and eval
//     alike (mapper.py@models-0.9.0 l.410).
func TestChunkedMapper(t *testing.T) {
	for _, tc := range []struct {
		v    graph.Version
		want map[string][]int64
	}{
		{graph.Version{Minor: 15}, map[string][]int64{
			"scatter_out": {1_024, 1_024, 1_024, 1_024},
			"edge_attr":   {3_072, 768, 768, 768, 768}, // the batch's [256, 3], then the chunks' copies
			"x_src":       {640, 640, 640, 640, 640},   // drop_unconnected_src_nodes' copy of all 20 rows, then the chunks'
			"edge_index":  {4_096, 1_024, 1_024, 1_024, 1_024},
			"out_dst":     {2_048},
		}},
		{graph.CurrentVersion(), map[string][]int64{
			"scatter_out": {1_024, 1_024, 1_024, 1_024},
			"edge_attr":   {3_072},                             // the batch's [256, 3]; the chunks' are views
			"x_src":       {320, 448, 448, 320},                // the chunks' copies of their 10, 14, 14, 10 source rows
			"edge_index":  {4_096, 1_024, 1_024, 1_024, 1_024}, // the batch's [2, 256], the chunks' clones
			"out_dst":     {2_048},
		}},
	} {
		prog, err := chunkedPlanAt(t, tc.v, 4, 1, core.Train, graph.BackendPyG).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		bytes := map[string][]int64{}
		for _, v := range prog.Values {
			if strings.HasPrefix(v.Name, "decoder.") {
				parts := strings.Split(v.Name, ".")
				bytes[parts[len(parts)-1]] = append(bytes[parts[len(parts)-1]], v.Bytes)
			}
		}
		for name, want := range tc.want {
			if got := bytes[name]; !slices.Equal(got, want) {
				t.Errorf("%s: decoder %s: %v bytes, want %v", tc.v, name, got, want)
			}
		}
	}
	prog, err := chunkedPlan(t, 4, 1, core.Train).LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	// One block serves every chunk: the program's own parameters (the
	// later chunks' tied to the first's) are the model's.
	var params int64
	for _, pi := range prog.Params {
		if pi.TiedTo < 0 {
			params += pi.Numel
		}
	}
	if want := chunkedPlan(t, 4, 1, core.Train).Model.Params(); params != want {
		t.Errorf("the program registers %d parameters, the model has %d", params, want)
	}
	var regions int
	for _, r := range prog.Regions {
		if strings.HasPrefix(prog.Ops[r.First].Name, "decoder.") {
			regions++
		}
	}
	if regions != 6 {
		t.Errorf("decoder checkpoint regions %d, want 6 (get_edges, the edges' preparation and 4 chunks)", regions)
	}
	for _, c := range []struct {
		chunks, eval int64
		phase        core.Phase
		want         int
	}{{4, 2, core.Eval, 4}, {1, 8, core.Train, 8}, {1, 8, core.Eval, 8}, {2, 1, core.Eval, 2}} {
		prog, err := chunkedPlan(t, c.chunks, c.eval, c.phase).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, v := range prog.Values {
			if strings.HasPrefix(v.Name, "decoder.") && strings.HasSuffix(v.Name, "scatter_out") {
				n++
			}
		}
		if n != c.want {
			t.Errorf("chunks %d, eval_chunks %d, %v: %d decoder scatter outputs, want %d", c.chunks, c.eval, c.phase, n, c.want)
		}
	}
}

// The edge sharding of 0.9.0 to 0.16.0 (no halo exchange in the
// processor yet) is not simulated: model sharding is refused there, not
// replayed as 0.8.1's head sharding or 0.18.0's edge sharding.
func TestChunkedMapperSharding(t *testing.T) {
	p := chunkedPlanAt(t, graph.Version{Minor: 16}, 4, 1, core.Train, graph.BackendPyG)
	p.Members, p.MembersMode, p.Parallel = 2, "spread", core.Parallelism{DP: 2, CP: 2, CPMode: "ulysses"}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "is not simulated") {
		t.Errorf("cp=2 with anemoi-models 0.16.0: %v, want the refusal", err)
	}
}
