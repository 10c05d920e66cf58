package replay

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// The validation pass replays through a copy of the step's allocator: the
// reserve it grows is the report's peak growth, in phase "validation",
// and the step's own requests report their growth again after it.
func TestValidationPassRecordsPeakGrowth(t *testing.T) {
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &nn.Attention{Name: "self_attn", Dim: 256, Heads: 4, KVHeads: 4, Impl: "flash", Causal: true}},
		&core.Residual{Layer: &nn.MLP{Dim: 256, Hidden: 1024, Act: "swiglu"}},
	}}
	m := &core.Model{Name: "tiny", Vocab: 1000, Loss: "cross_entropy", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 1000, Dim: 256},
		&core.Repeat{Name: "layers", Layer: block, N: 2},
	}}
	prec, _ := core.LookupPrecision("bf16-mixed")
	dev, _ := hw.LookupDevice("H100-80GB")
	rt, _ := core.LookupRuntime("cuda")
	plan := &core.Plan{Model: m, Batch: 2, Seq: 512, GradAccum: 1, Members: 1, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Runtime: rt, Validation: true}
	prog, err := plan.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	valProg, valPlan, err := plan.LowerValidation()
	if err != nil {
		t.Fatal(err)
	}
	r := NewReplay(prog, plan, core.Options{}, plan.Device.Memory)
	r.validationPass(valProg, valPlan) // on an empty allocator: every segment is growth
	g := r.Rep.Frag.PeakGrowth
	if g == nil {
		t.Fatalf("no peak growth after a validation pass that reserved %d B", r.alloc.Reserved)
	}
	if g.Alloc.Phase != PhaseValidation || g.Reserved != r.alloc.Reserved || g.Reserved == 0 {
		t.Errorf("peak growth in %s to %d B, want phase validation and the reserve %d B", g.Alloc.Phase, g.Reserved, r.alloc.Reserved)
	}
	r.phase, r.op = PhaseForward, "after validation"
	r.allocate(Alloc{Bytes: 2 * r.alloc.Reserved, Cat: core.CatTemporaries, Tensor: "big"})
	if g := r.Rep.Frag.PeakGrowth; g == nil || g.Alloc.Tensor != "big" || g.Alloc.Phase != PhaseForward {
		t.Errorf("the step's growth past the validation's reserve is not recorded: %+v", g)
	}
}
