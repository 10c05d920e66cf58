package sim

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// tinyGraphPlan is an ensemble encoder-processor-decoder over a 64-point
// grid and a 10-node mesh (encoder knn 4: 40 edges, decoder knn 2: 128
// edges, 3 fixed edge attributes, no trainable attributes), 16 inputs and
// 4 outputs per point, built from a data batch of 3 dates x 6 variables.
func tinyGraphPlan(t *testing.T, members int64, mode, precision string) *core.Plan {
	t.Helper()
	grid, _ := graph.Grid("g", 64)
	mesh, _ := graph.Mesh("m", 10)
	enc, _ := graph.KNNEdges(grid, mesh, 4)
	dec, _ := graph.KNNEdges(mesh, grid, 2)
	mapper := func(e *graph.EdgeSet) *graph.GraphTransformer {
		return &graph.GraphTransformer{Edges: e, Channels: 8, Heads: 2, MLPRatio: 4, EdgeAttrs: 3, Chunks: 1, EvalChunks: 1, Checkpoint: true}
	}
	proc := &graph.TransformerProcessor{Mesh: mesh, Layers: 2, Channels: 8, Heads: 2, MLPRatio: 4, Segments: 1}
	epd, err := graph.NewEncoderProcessorDecoder(graph.EncoderProcessorDecoder{Name: "tiny", Grid: grid, Mesh: mesh,
		Encoder: mapper(enc), Processor: proc, Decoder: mapper(dec), Inputs: 16, Outputs: 4, NoiseChannels: 4, NoiseHidden: 8,
		Data: &core.DataBatch{Times: 3, Variables: 6}})
	if err != nil {
		t.Fatal(err)
	}
	prec, _ := core.LookupPrecision(precision)
	rt, _ := core.LookupRuntime("cuda")
	dev, _ := hw.LookupDevice("H100")
	return &core.Plan{Model: graph.NewGraphModel(epd, "crps"), Batch: 1, Seq: 1, GradAccum: 1, Members: members, MembersMode: mode,
		Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Phase: core.Train, Runtime: rt}
}

// The data loader's batch is the program input, held for the whole step;
// the model's input is built from it and lives only in the rollout loop
// (the forward), not through the backward.
func TestDataBatchLifetime(t *testing.T) {
	p := tinyGraphPlan(t, 2, "stacked", "fp32")
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	in := prog.Values[prog.Input]
	if want := []int64{1, 3, 1, 64, 6}; !slices.Equal(in.Shape, want) || in.Dtype != units.FP32 || in.Cached {
		t.Fatalf("program input %s %v %s cached=%v, want the batch %v fp32 held for the step", in.Name, in.Shape, in.Dtype, in.Cached, want)
	}
	// The first input, built from the batch, and the one advance_input
	// builds after the step (core/rollout.go), a local until the loop ends.
	var xs []*core.ValueInfo
	for i := range prog.Values {
		if prog.Values[i].Name == "inputs" {
			xs = append(xs, &prog.Values[i])
		}
	}
	if len(xs) != 2 || !slices.Equal(xs[0].Shape, []int64{2, 64, 16}) || xs[0].Cached || !xs[1].Cached || xs[1].Grad {
		t.Fatalf("model inputs %+v, want the first [2 members, 64 points, 16] and the next one held until the forward ends", xs)
	}
	r, err := Evaluate(p, core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// fp32: no autocast weight cache, so the end of the forward frees only
	// the next step's input, 2 x 64 x 16 x 4 = 8,192 bytes.
	tl := r.Timeline
	freed := int64(-1)
	for i := 1; i < len(tl); i++ {
		if tl[i].Op == "end of forward" && tl[i-1].Op != "end of forward" {
			freed = tl[i-1].Allocated - tl[i].Allocated
		}
	}
	if freed != 8_192 {
		t.Errorf("the end of the forward freed %d bytes, want the model input's 8,192", freed)
	}
}

// In validation the batch is normalised into a clone that replaces it in
// Lightning's batch list: the loaded batch is freed after its last use and
// the clone is held for the step.
func TestDataBatchValidation(t *testing.T) {
	p := tinyGraphPlan(t, 2, "stacked", "fp32")
	p.Phase = core.Eval
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	if !prog.InputTransient || len(prog.Held) != 1 {
		t.Fatalf("eval: input transient %v, held %d values, want the loaded batch dropped and its copy held", prog.InputTransient, len(prog.Held))
	}
	if c := prog.Values[prog.Held[0]]; c.Name != "batch_normalized" || c.Bytes != 3*64*6*4 {
		t.Errorf("eval: held %s of %d bytes, want the normalised batch of 4,608", c.Name, c.Bytes)
	}
}

// The graph's buffers are on the device once, however the members run:
// 40 + 128 edges x (3 fp32 attributes + 2 int64 indices) = 4,704, two
// edge_inc [2, 1] int64 = 32, and sin/cos coordinates of 64 + 10 nodes x
// 16 bytes = 1,184: 5,920 bytes.
func TestGraphBuffers(t *testing.T) {
	for _, mode := range []string{"stacked", "sequential"} {
		r, err := Evaluate(tinyGraphPlan(t, 2, mode, "fp16-mixed"), core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.States.Buffers != 5_920 {
			t.Errorf("%s: buffers %d bytes, want 5,920", mode, r.States.Buffers)
		}
	}
}

func TestDataBatchErrors(t *testing.T) {
	for _, d := range []core.DataBatch{{Times: 0, Variables: 6}, {Times: 3, Variables: -1}} {
		if err := d.Validate("m"); err == nil {
			t.Errorf("%+v: no error", d)
		}
	}
}
