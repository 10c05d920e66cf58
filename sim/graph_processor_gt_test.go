package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/hw"
)

// gtProcessorPlan is one GraphTransformerProcessor layer over a 10-node
// mesh with 20 edges (C = 8, H = 2, 3 fixed edge attributes), on its own
// (no noise: plain layer norms), reading fp32 x [1, 10, 8].
func gtProcessorPlan(t *testing.T, precision string, evalChunks int64, phase string) *core.Plan {
	t.Helper()
	mesh, _ := graph.Mesh("m", 10)
	edges, err := graph.MultiscaleEdges(mesh, 2)
	if err != nil {
		t.Fatal(err)
	}
	proc := &graph.GraphTransformerProcessor{Edges: edges, Layers: 1, Channels: 8, Heads: 2, MLPRatio: 4, EdgeAttrs: 3,
		Segments: 1, EvalChunks: evalChunks, QKNorm: true}
	prec, _ := core.LookupPrecision(precision)
	rt, _ := core.LookupRuntime("cuda")
	dev, _ := hw.LookupDevice("H100")
	return &core.Plan{Model: &core.Model{Name: "p", Layers: []core.Layer{proc}, Loss: "mse", InputDim: 8}, Batch: 1, Seq: 10, GradAccum: 1,
		Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Phase: mustPhase(phase), Runtime: rt}
}

func TestGraphTransformerProcessorParams(t *testing.T) {
	// lin_key/query/value/self 4 x (64 + 8) = 288; lin_edge 3 x 8 + 8 = 32;
	// projection 64 + 8 = 72; q/k norms 2 x 4 = 8; two layer norms 2 x 16 =
	// 32; node MLP 8 x 32 + 32 + 32 x 8 + 8 = 552: 984.
	p := gtProcessorPlan(t, "fp16-mixed", 1, "train")
	if got := p.Model.Params(); got != 984 {
		t.Errorf("params %d, want 984", got)
	}
	noisy := p.Model.Layers[0].(*graph.GraphTransformerProcessor).Conditioned(4)
	// The layer norms become ConditionalLayerNorms: 2 x (scale and bias
	// Linear(4, 8)) = 2 x 2 x 40 = 160 instead of 32.
	if got := noisy.Params(); got != 984-32+160 {
		t.Errorf("params with noise %d, want %d", got, 984-32+160)
	}
}

// The tensors autograd keeps for one layer's backward under fp16 autocast,
// counted by hand from block.py/conv.py@models-0.8.1 (S = 10 nodes, E = 20
// edges, C = 8, H = 2):
//
//	layer_norm_attention: x (fp32 input, 4SC), mean and rstd (8S)
//	lin_self, lin_query, lin_key, lin_value: fp16 casts of the fp32 norm output (4 x 2SC)
//	lin_edge: fp16 cast of edge_attr [E, 3] (6E)
//	q_norm, k_norm: fp32 copies of q and k (2 x 4SC), mean and rstd per head (2 x 8SH)
//	conv: query_i and key_j + edges (mul, 2 x 2EC), value_j + edges (2EC),
//	      softmax exp and denominator (8EH), alpha (4EH), the edge index (16E)
//	projection: fp16 cast of out + x_r (2SC)
//	layer_norm_mlp_dst: out + x_skip (fp32, 4SC), mean and rstd (8S)
//	node_dst_mlp: fp16 cast (2SC), GELU input and output (2 x 8SC)
//
// 44SC + 6EC + 22E + 12EH + 16S + 16SH = 3,520 + 960 + 440 + 480 + 160 +
// 320 = 5,880 bytes.
func TestGraphTransformerProcessorSaved(t *testing.T) {
	prog, err := gtProcessorPlan(t, "fp16-mixed", 1, "train").LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[core.Value]bool{}
	var saved int64
	for _, op := range prog.Ops {
		if !strings.HasPrefix(op.Name, "processor.") {
			continue // the loss
		}
		for _, v := range op.Saved {
			if !seen[v] && prog.Values[v].Cat == core.CatActivations {
				seen[v] = true
				saved += prog.Values[v].Bytes
			}
		}
	}
	if saved != 5_880 {
		t.Errorf("saved %d bytes for one layer, want 5,880", saved)
		for v := range seen {
			t.Logf("  %s %v %s %d", prog.Values[v].Name, prog.Values[v].Shape, prog.Values[v].Dtype, prog.Values[v].Bytes)
		}
	}
}

// In training the blocks run their edges in one piece (chunk.py l.260:
// num_chunks=1); in eval they split them into EvalChunks, each chunk
// scattering into its own tensor over all nodes.
func TestGraphTransformerProcessorChunks(t *testing.T) {
	for _, c := range []struct {
		phase  string
		chunks int64
		want   int
	}{{"train", 4, 1}, {"eval", 4, 4}, {"eval", 1, 1}} {
		prog, err := gtProcessorPlan(t, "fp16-mixed", c.chunks, c.phase).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, v := range prog.Values {
			if strings.HasSuffix(v.Name, "scatter_out") {
				n++
				if v.Bytes != 10*8*4 {
					t.Errorf("%s eval_chunks %d: %s is %d B, want an fp32 [10, 8] over all nodes", c.phase, c.chunks, v.Name, v.Bytes)
				}
			}
		}
		if n != c.want {
			t.Errorf("%s eval_chunks %d: %d scatter outputs, want %d", c.phase, c.chunks, n, c.want)
		}
	}
}

func TestGraphTransformerProcessorErrors(t *testing.T) {
	mesh, _ := graph.Mesh("m", 10)
	grid, _ := graph.Grid("g", 20)
	edges, _ := graph.MultiscaleEdges(mesh, 2)
	knn, _ := graph.KNNEdges(mesh, grid, 1)
	ok := graph.GraphTransformerProcessor{Edges: edges, Layers: 4, Channels: 8, Heads: 2, MLPRatio: 4, EdgeAttrs: 3, Segments: 2, EvalChunks: 1}
	for _, c := range []struct {
		name string
		edit func(p *graph.GraphTransformerProcessor)
		want string
	}{
		{"no edges", func(p *graph.GraphTransformerProcessor) { p.Edges = nil }, "needs the mesh's edges (multiscale_edges)"},
		{"mapper edges", func(p *graph.GraphTransformerProcessor) { p.Edges = knn }, "edges must connect a mesh's nodes to each other"},
		{"segments", func(p *graph.GraphTransformerProcessor) { p.Segments = 3 }, "segments must divide layers (layers=4, segments=3)"},
		{"heads", func(p *graph.GraphTransformerProcessor) { p.Heads = 3 }, "heads must divide channels"},
		{"trainable", func(p *graph.GraphTransformerProcessor) { p.TrainableEdgeAttrs = 4 }, "trainable_edge_attrs must be in [0, edge_attrs=3] (got 4)"},
		{"eval chunks", func(p *graph.GraphTransformerProcessor) { p.EvalChunks = 11 }, "eval_chunks must be in [1, 10]"},
		{"layers", func(p *graph.GraphTransformerProcessor) { p.Layers = 0 }, "layers"},
	} {
		p := ok
		c.edit(&p)
		if err := p.Validate("processor"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := ok.Validate("processor"); err != nil {
		t.Errorf("valid processor: %v", err)
	}
}
