package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// A small causal LM, run with 2 members stacked and one at a time.
func membersPlan(t *testing.T, mode string) *core.Plan {
	t.Helper()
	m := &core.Model{Name: "lm", Loss: "cross_entropy", Vocab: 1000, Layers: []core.Layer{
		&nn.Embedding{Rows: 1000, Dim: 64},
		&nn.Attention{Dim: 64, Heads: 4, Impl: "flash", Causal: true},
		&nn.MLP{Dim: 64, Hidden: 256, Act: "gelu"},
	}}
	prec, _ := core.LookupPrecision("bf16-mixed")
	rt, _ := core.LookupRuntime("cuda")
	dev, _ := hw.LookupDevice("H200")
	return &core.Plan{Model: m, Batch: 2, Seq: 16, GradAccum: 1, Members: 2, MembersMode: mode, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Phase: core.Train, Runtime: rt}
}

func TestSequentialMembersShareState(t *testing.T) {
	stacked, seq := membersPlan(t, "stacked"), membersPlan(t, "sequential")
	rs, err := Evaluate(stacked, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rq, err := Evaluate(seq, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One set of parameters, gradients and AdamW moments for all members.
	if rq.States != rs.States || rq.TrainableParams != rs.TrainableParams || rq.TrainableParams != 1000*64+4*64*64+2*64*256+64*1000 {
		t.Errorf("sequential states %+v (%d trainable), stacked %+v (%d)", rq.States, rq.TrainableParams, rs.States, rs.TrainableParams)
	}
	// Autocast's weight cache makes each bf16 weight copy once for all
	// members: q, k, v, o (4 x 64 x 64), fc1, fc2 (2 x 64 x 256) and the
	// head (1000 x 64), 2 bytes each = 226,304 B.
	const copies = (4*64*64 + 2*64*256 + 1000*64) * 2
	if rq.SavedWeightCopies != copies || rs.SavedWeightCopies != copies {
		t.Errorf("weight copies held for backward: sequential %d, stacked %d, want %d", rq.SavedWeightCopies, rs.SavedWeightCopies, copies)
	}
	// Each member runs its own forward on its own rows; the outputs are
	// concatenated before the loss.
	pq, err := seq.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var cat *core.OpInfo
	members := map[string]bool{}
	for i := range pq.Ops {
		o := &pq.Ops[i]
		if o.Kind == "cat" && o.Name == "members_cat" {
			cat = o
		}
		if i := strings.IndexByte(o.Name, '.'); i > 0 && strings.HasPrefix(o.Name, "member") {
			members[o.Name[:i]] = true
		}
	}
	if cat == nil || len(cat.In) != 2 || len(members) != 2 {
		t.Fatalf("sequential program: cat %+v, members %v", cat, members)
	}
	if s := pq.Values[cat.Out[0]].Shape; len(s) != 3 || s[0] != 4 || s[1] != 16 || s[2] != 1000 {
		t.Errorf("concatenated logits %v, want [4 16 1000]", s)
	}
	if s := pq.Values[pq.Input].Shape; s[0] != 4 {
		t.Errorf("input %v, want all 4 rows", s)
	}
}

func TestGraphModelErrors(t *testing.T) {
	// CRPS compares members: it needs at least two.
	p := bris(t, 1, "stacked", 16, 1, "train")
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "the crps loss compares ensemble members: it needs members >= 2 (got 1)") {
		t.Errorf("crps with one member: %v", err)
	}
	// A graph model's rows are its grid points.
	p = bris(t, 2, "stacked", 16, 1, "train")
	p.Seq = 2048
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), `seq must be left unset for graph model "bris": its rows are the 1359281 grid points`) {
		t.Errorf("seq on a graph model: %v", err)
	}
	// A mapper reads two node sets: it does not lower as a plain layer.
	grid, _ := graph.Grid("g", 100)
	mesh, _ := graph.Mesh("m", 10)
	e, _ := graph.KNNEdges(grid, mesh, 4)
	gt := &graph.GraphTransformer{Edges: e, Channels: 8, Heads: 2, MLPRatio: 4, EdgeAttrs: 11, TrainableEdgeAttrs: 8, Chunks: 1, EvalChunks: 1}
	p.Model = &core.Model{Name: "bare", Layers: []core.Layer{gt}, Loss: "mse", InputDim: 8}
	p.Seq = 1
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "runs only as the encoder or decoder of encoder_processor_decoder") {
		t.Errorf("bare graph_transformer: %v", err)
	}
	// The parts must connect.
	dec, _ := graph.KNNEdges(grid, mesh, 3) // wrong direction for a decoder
	proc := &graph.TransformerProcessor{Mesh: mesh, Layers: 2, Channels: 8, Heads: 2, MLPRatio: 4, Segments: 1}
	gd := *gt
	gd.Edges = dec
	_, err := graph.NewEncoderProcessorDecoder(graph.EncoderProcessorDecoder{Name: "x", Grid: grid, Mesh: mesh, Encoder: gt, Processor: proc, Decoder: &gd, Inputs: 4, Outputs: 2})
	if err == nil || !strings.Contains(err.Error(), "it must map the mesh") {
		t.Errorf("decoder grid -> mesh: %v", err)
	}
	gt.Chunks = 11
	if err := gt.Validate("enc"); err == nil || !strings.Contains(err.Error(), "chunks must be in [1, 10], the destination nodes it splits (got 11)") {
		t.Errorf("chunks above destination nodes: %v", err)
	}
}

func TestSequentialMembersRefuseTables(t *testing.T) {
	p := membersPlan(t, "sequential")
	p.Model.Layers = append([]core.Layer{p.Model.Layers[0], &core.Residual{Layer: &replay.Table{Name: "ngram", Rows: 1024, Dim: 16, Heads: 4, Grad: "dense", Placement: "device"}}},
		p.Model.Layers[1:]...)
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "sequential members are not modelled for models with table layers") {
		t.Errorf("table with sequential members: %v", err)
	}
	p.MembersMode = "stacked"
	if _, err := Evaluate(p, core.Options{}); err != nil {
		t.Errorf("table with stacked members: %v", err)
	}
}
