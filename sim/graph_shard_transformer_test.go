package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/hw"
)

// transformerProcessorPlan is one TransformerProcessor layer over a
// 10-node mesh (C = 8, H = 2, q/k norms, global attention), on its own,
// reading fp32 x [1, 10, 8] under fp16 autocast.
func transformerProcessorPlan(t *testing.T) *core.Plan {
	t.Helper()
	mesh, _ := graph.Mesh("m", 10)
	proc := &graph.TransformerProcessor{Mesh: mesh, Layers: 1, Channels: 8, Heads: 2, MLPRatio: 4, Segments: 1, QKNorm: true}
	prec, _ := core.LookupPrecision("fp16-mixed")
	rt, _ := core.LookupRuntime("cuda")
	dev, _ := hw.LookupDevice("H100")
	return &core.Plan{Model: &core.Model{Name: "p", Layers: []core.Layer{proc}, Loss: "mse", InputDim: 8}, Batch: 1, Seq: 10, GradAccum: 1, Members: 1,
		Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Phase: core.Train, Runtime: rt}
}

// The tensors one TransformerProcessor layer keeps for its backward
// (S = 10 nodes, C = 8, H = 2, fp16 autocast), counted by hand from
// layers/block.py and layers/attention.py@models-0.8.1, on one GPU:
//
//	layer_norm_attention: x (fp32, 4SC), mean and rstd (8S)
//	lin_q, lin_k, lin_v: fp16 casts of the fp32 norm output (3 x 2SC)
//	q_norm, k_norm: fp32 copies of q and k (2 x 4SC), mean and rstd per head (2 x 8SH)
//	flash attention: q, k, v and the output (4 x 2SC), the fp32 logsumexp (4SH)
//	layer_norm_mlp: x + attention (fp32, 4SC), mean and rstd (8S)
//	mlp: fp16 cast (2SC), GELU input and output (2 x 8SC)
//
// 48SC + 16S + 20SH = 3,840 + 160 + 400 = 4,400 bytes (the projection
// reads the flash output, already kept). Sharded over G = 2 GPUs
// (anemoi's num_gpus_per_model; parallel(cp=2, cp_mode="ulysses")), the
// node-wise tensors hold this rank's S/G = 5 rows and shard_heads gives
// q, k and v all S rows for H/G = 1 head (C/G = 4 channels):
//
//	layer norms: 2 x (4 x 5 x 8 + 8 x 5) = 400
//	lin_q/k/v casts: 3 x 2 x 5 x 8 = 240
//	q_norm, k_norm on the exchanged q, k: 2 x 4 x 10 x 4 + 2 x 8 x 10 x 1 = 480
//	flash: 4 x 2 x 10 x 4 + 4 x 10 x 1 = 360
//	projection: its input, shard_sequence's output [5, 8] fp16 = 80
//	mlp: 2 x 5 x 8 + 2 x 8 x 5 x 8 = 720
//
// 2,280 bytes.
func TestTransformerProcessorSharding(t *testing.T) {
	for _, c := range []struct {
		cp   int64
		want int64
	}{{1, 4_400}, {2, 2_280}} {
		p := transformerProcessorPlan(t)
		if c.cp > 1 {
			p.Parallel = core.Parallelism{CP: c.cp, CPMode: "ulysses"}
		}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		if got := processorSaved(prog); got != c.want {
			t.Errorf("cp=%d: saved %d bytes for one layer, want %d", c.cp, got, c.want)
		}
	}
}

// processorSaved is the activation bytes the processor's ops save, each
// tensor once.
func processorSaved(prog *core.Program) int64 {
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
	return saved
}
