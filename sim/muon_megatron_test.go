package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// TestMuonMegatron replays Megatron-LM's Muon (core/muon_megatron.go,
// core/muon_layerwise.go) on a small Llama, counted by hand: per layer q
// and o 1,024 x 1,024, k and v 256 x 1,024, the MLP's three 2,816 x
// 1,024, M = 45,088,768 matrix elements in 4 layers; the rest R, the
// embedding and the untied head 32,000 x 1,024 each and nine 1,024
// norms, 65,545,216.
//
//   - tp 2, dp 2: every rank holds its half of each matrix's fp32 main
//     parameter and momentum, Adam's two moments elsewhere: 4 B x M / 2
//     less than Adam's state; the step gathers the largest matrix's fp32
//     shards, the MLP's gate and up as Megatron's one linear_fc1,
//     [5,632, 1,024] whole on every rank.
//   - dp 2 with the distributed optimizer, the layer-wise one: shard 0
//     owns half the matrices (each size class splits evenly,
//     LayerWiseShards), 4 B x M / 2 of momentum, and the distributed
//     optimizer's byte-level shard of the rest, 8 B x R / 2 of Adam's
//     moments; Adam under the distributed optimizer holds 8 B x (M + R) / 2.
//   - its optimizer step takes less time than every rank's whole step.
func TestMuonMegatron(t *testing.T) {
	const matrices, rest = 45_088_768, 65_545_216
	m := testmodels.Llama(1024, 4, 16, 4, 2816, 32000, "flash")
	muon := core.Optimizer{Kind: core.Muon, Impl: "foreach", Momentum: 0.9, NSSteps: 5}
	eval := func(o core.Optimizer, par core.Parallelism) *replay.Report {
		p := testmodels.LlamaPlan(m, 1, 1024, "megatron", "full", "H100-80GB")
		p.Optimizer, p.Parallel = o, par
		p.Cluster.GPUsPerNode = par.GPUs()
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatalf("%+v: %v", par, err)
		}
		return r
	}
	adam := core.Optimizer{Kind: core.Adam}
	tp := core.Parallelism{TP: 2, DP: 2}
	r, a := eval(muon, tp), eval(adam, tp)
	if got, want := a.States.Optimizer-r.States.Optimizer, int64(4*matrices/2); got != want {
		t.Errorf("tp 2: Muon's state %d B under Adam's, want %d (one fp32 moment of M/2 elements)", got, want)
	}
	if r.States.Master != a.States.Master {
		t.Errorf("tp 2: master %d B, Adam's %d: the same fp32 main parameters", r.States.Master, a.States.Master)
	}
	gathered := false
	for _, e := range r.Trace.Events {
		if strings.Contains(e.Tensor, "muon cat") && e.Size == 4*2*2816*1024 {
			gathered = true
		}
	}
	if !gathered {
		t.Error("tp 2: no [5632, 1024] fp32 cat of the gathered linear_fc1 shards in the step")
	}
	dist := core.Parallelism{DP: 2, DistributedOptimizer: true}
	lw, ad := eval(muon, dist), eval(adam, dist)
	if got, want := ad.States.Optimizer, int64(8*(matrices+rest)/2); got != want {
		t.Errorf("Adam, distributed optimizer: state %d B, want %d", got, want)
	}
	if got, want := lw.States.Optimizer, int64(4*matrices/2+8*rest/2); got != want {
		t.Errorf("layer-wise: state %d B, want %d (the momentum of half the matrices, Adam's shard of the rest)", got, want)
	}
	if lw.States.Master != ad.States.Master {
		t.Errorf("layer-wise: master %d B, the distributed optimizer's %d", lw.States.Master, ad.States.Master)
	}
	whole := eval(muon, core.Parallelism{DP: 2})
	if a, b := optimizerSeconds(t, lw), optimizerSeconds(t, whole); a >= b {
		t.Errorf("layer-wise step %g s, every matrix on every rank %g s: half the Newton-Schulz should take less", a, b)
	}
}

func optimizerSeconds(t *testing.T, r *replay.Report) float64 {
	for _, b := range r.Time.Breakdown {
		if b.Name == "optimizer" {
			return b.Seconds
		}
	}
	t.Fatalf("no optimizer term in %v", r.Time.Breakdown)
	return 0
}
