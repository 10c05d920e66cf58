package testmodels

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/hw"
)

// Bris is the training plan of the Bris model of SEEDS.md story 1 as its
// public counterpart ran it (Eliastrana/extreme-bris: a fine-tune of MET Norway's published Bris
// CRPS checkpoint on one 140 GB H200 with anemoi-models 0.8.1;
// bris/train/finetune.yaml, bris/slurm/finetune.sbatch, xbris/patches.py)
// and anemoi-training 0.5.1's graphtransformer_ens.yaml under it:
// 1,359,281 grid points, 261,634 hidden nodes, encoder knn 12 per hidden
// node, decoder knn 3 per grid point, processor multi-scale edges (8 per
// node, an estimate), 1024 channels, 16 heads, a 16-layer
// GraphTransformerProcessor (q/k norms) in num_chunks 4 checkpoint
// segments, encoder and decoder num_chunks 4, no trainable edge or node
// attributes (3 fixed edge attributes), 95 input variables (84 prognostic)
// and 87 outputs, multistep 2, rollout 1: 2 x 95 + 84 + 1 = 275 input
// features per point, a data batch of 3 dates x 98 variables; fp16
// autocast (16-mixed), AdamW, PYTORCH_CUDA_ALLOC_CONF=
// expandable_segments:True (finetune.sbatch), one H200 (143,771 MiB).
// Validation chunks as finetune.sbatch exports them when evalChunks > 1:
// ANEMOI_INFERENCE_NUM_CHUNKS_MAPPER=32 for the mappers and
// ANEMOI_INFERENCE_NUM_CHUNKS=16 for the processor; unset, both are 1.
func Bris(members int64, mode string, chunks, evalChunks int64, phase core.Phase) (*core.Plan, error) {
	grid, _ := graph.Grid("bris", 1_359_281)
	mesh, _ := graph.Mesh("hidden", 261_634)
	enc, _ := graph.KNNEdges(grid, mesh, 12)
	dec, _ := graph.KNNEdges(mesh, grid, 3)
	multi, _ := graph.MultiscaleEdges(mesh, 0)
	mapper := func(e *graph.EdgeSet) *graph.GraphTransformer {
		return &graph.GraphTransformer{Edges: e, Channels: 1024, Heads: 16, MLPRatio: 4, EdgeAttrs: 3,
			Chunks: chunks, EvalChunks: evalChunks, Checkpoint: true}
	}
	procEval := int64(1)
	if evalChunks > 1 {
		procEval = 16
	}
	proc := &graph.GraphTransformerProcessor{Edges: multi, Layers: 16, Channels: 1024, Heads: 16, MLPRatio: 4, EdgeAttrs: 3,
		Segments: 4, EvalChunks: procEval, QKNorm: true}
	epd, err := graph.NewEncoderProcessorDecoder(graph.EncoderProcessorDecoder{Name: "bris", Grid: grid, Mesh: mesh,
		Encoder: mapper(enc), Processor: proc, Decoder: mapper(dec), Inputs: 275, Outputs: 87, NoiseChannels: 4, NoiseHidden: 32,
		Data: &core.DataBatch{Times: 3, Variables: 98}})
	if err != nil {
		return nil, err
	}
	prec, _ := core.LookupPrecision("fp16-mixed")
	rt, _ := core.LookupRuntime("cuda-2.6")
	dev, _ := hw.LookupDevice("H200")
	return &core.Plan{Model: graph.NewGraphModel(epd, "crps"), Batch: 1, Seq: 1, GradAccum: 1, Members: members, MembersMode: mode,
		Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Phase: phase,
		Runtime: rt, ExpandableSegments: true}, nil
}
