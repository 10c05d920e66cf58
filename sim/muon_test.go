package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// TestMuonPlan replays muon() on a small Llama: the momentum buffer on
// its matrices, AdamW's moments on the embedding, head and norms, the
// step's peak the largest matrix's Newton-Schulz tensors (the MLP's
// 1,024 x 2,816, k = 1,024) or its AdamW's foreach temporaries, and its
// time growing with ns_steps by the products it adds.
func TestMuonPlan(t *testing.T) {
	const hidden, layers, ffn, vocab = 1024, 4, 2816, 32000
	m := testmodels.Llama(hidden, layers, 16, 4, ffn, vocab, "sdpa")
	muon := core.Optimizer{Kind: core.Muon, Impl: "foreach", Momentum: 0.95, Nesterov: true, NSSteps: 5}
	eval := func(o core.Optimizer, prec string) *replay.Report {
		p := testmodels.LlamaPlan(m, 1, 1024, prec, "full", "H100-80GB")
		p.Optimizer = o
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// The matrices Muon steps: q, k, v, o (k and v 4 heads of 64) and the
	// MLP's three, per layer.
	const matrices = layers * (2*hidden*hidden + 2*hidden*256 + 3*hidden*ffn)
	for _, prec := range []string{"bf16-mixed", "bf16"} {
		r, adam := eval(muon, prec), eval(core.Optimizer{Kind: core.AdamW, Impl: "foreach"}, prec)
		st := adam.States.Optimizer - r.States.Optimizer // one moment less on each matrix element
		states, _ := core.LookupPrecision(prec)
		if want := states.States.Bytes(matrices); st != want {
			t.Errorf("%s: muon's state %d B under AdamW's, want %d (one moment of %d matrix elements)", prec, st, want, matrices)
		}
		// The Newton-Schulz tensors of the largest matrix appear in the trace.
		found := false
		for _, e := range r.Trace.Events {
			if strings.Contains(e.Tensor, "muon gram_update") && e.Size == units.BF16.Bytes(hidden*hidden) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no [%d, %d] bf16 Gram update in the step", prec, hidden, hidden)
		}
	}
	optimizer := func(r *replay.Report) float64 {
		for _, b := range r.Time.Breakdown {
			if b.Name == "optimizer" {
				return b.Seconds
			}
		}
		t.Fatalf("no optimizer term in %v", r.Time.Breakdown)
		return 0
	}
	five := eval(muon, "bf16-mixed")
	ten := muon
	ten.NSSteps = 10
	tenR := eval(ten, "bf16-mixed")
	if a, b := optimizer(tenR), optimizer(five); a <= b {
		t.Errorf("ns_steps 10 steps in %g s, 5 in %g s: five more iterations should take longer", a, b)
	}
	// The reference form: the same state, three [1,024, 2,816] bf16 tensors
	// more at the step's peak, five more kernels an iteration.
	ref := muon
	ref.NS = core.MuonReference
	refR := eval(ref, "bf16-mixed")
	if refR.States.Optimizer != five.States.Optimizer {
		t.Errorf("reference form's state %d B, torch's %d", refR.States.Optimizer, five.States.Optimizer)
	}
	if a, b := optimizer(refR), optimizer(five); a <= b {
		t.Errorf("the reference form steps in %g s, torch's in %g s: its elementwise kernels should take longer", a, b)
	}
	found := false
	for _, e := range refR.Trace.Events {
		if strings.Contains(e.Tensor, "muon B @ X") && e.Size == units.BF16.Bytes(hidden*ffn) {
			found = true
		}
	}
	if !found {
		t.Errorf("no [%d, %d] bf16 B @ X in the reference form's step", hidden, ffn)
	}
}

// TestMuonRefusedSharded: Muon orthogonalizes whole matrices; memsh
// replays it unsharded only.
func TestMuonRefusedSharded(t *testing.T) {
	m := testmodels.Llama(1024, 2, 16, 4, 2816, 32000, "sdpa")
	for _, c := range []struct {
		par  core.Parallelism
		want string
	}{
		{core.Parallelism{DP: 4, Zero: 2}, "muon() with zero="},
		{core.Parallelism{DP: 4, FSDP: true}, "muon() with fsdp="},
		{core.Parallelism{TP: 2}, "muon() with tp="},
	} {
		p := testmodels.LlamaPlan(m, 1, 1024, "bf16-mixed", "full", "H100-80GB")
		p.Optimizer = core.Optimizer{Kind: core.Muon, Impl: "foreach", Momentum: 0.95, Nesterov: true, NSSteps: 5}
		p.Parallel = c.par
		p.Cluster.GPUsPerNode = 8
		_, err := Evaluate(p, core.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.par, err, c.want)
		}
	}
	p := testmodels.LlamaPlan(m, 1, 1024, "bf16-mixed", "full", "H100-80GB")
	p.Optimizer = core.Optimizer{Kind: core.Muon, Impl: "foreach", Momentum: 0.95, Nesterov: true, NSSteps: 5}
	p.Parallel = core.Parallelism{DP: 4}
	p.Cluster.GPUsPerNode = 4
	if _, err := Evaluate(p, core.Options{}); err != nil {
		t.Errorf("data parallel: %v", err)
	}
}
