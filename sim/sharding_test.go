package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// linearStack is n blocks of two bias-free linears (d -> f -> d): every
// parameter is a large matrix, so ZeRO-3 keeps none whole and the model
// states are exactly the ZeRO paper's.
func linearStack(n, d, f int64) *core.Model {
	block := &core.Sequential{Layers: []core.Layer{
		&nn.Linear{Name: "up", In: d, Out: f},
		&nn.Linear{Name: "down", In: f, Out: d},
	}}
	return &core.Model{Name: "stack", Layers: []core.Layer{&core.Repeat{Layer: block, N: n}}, Loss: "mse", InputDim: d}
}

func distPlan(t testing.TB, m *core.Model, precision string, par core.Parallelism) *core.Plan {
	t.Helper()
	prec, err := core.LookupPrecision(precision)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := core.LookupRuntime("cuda")
	dev, err := hw.LookupDevice("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	return &core.Plan{Model: m, Batch: 1, Seq: 8, GradAccum: 1, Members: 1, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Runtime: rt,
		Device: dev, Phase: core.Train, Parallel: par}
}

func evalPlan(t testing.TB, p *core.Plan) *replay.Report {
	t.Helper()
	rep, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestZeROStates checks r.states against the ZeRO paper (Rajbhandari et
// al. 2019, section 3, Figure 1) for mixed-precision Adam: fp16 parameters
// and gradients, fp32 master weights and moments (K = 12):
//
//	baseline  params 2Ψ    grads 2Ψ    master+optimizer 12Ψ
//	P_os      params 2Ψ    grads 2Ψ    master+optimizer 12Ψ/N
//	P_os+g    params 2Ψ    grads 2Ψ/N  master+optimizer 12Ψ/N
//	P_os+g+p  params 2Ψ/N  grads 2Ψ/N  master+optimizer 12Ψ/N
//
// to the byte, for Ψ divisible by 2N (DeepSpeed pads ZeRO-1/2 partitions
// to 2N elements; TestZeROPadding covers the rest). The 7.5B rows are
// calibration.md E1: Ψ = 7.5e9, N = 64 gives 120, 31.4, 16.6 and 1.9 GB.
//
// Except P_os+g's gradients: DeepSpeed's stage 2 copies the gradient of
// every parameter overlapping the rank's partition into
// grads_in_partition whole (stage_1_and_2.py copy_grads_in_partition,
// l.1650-1689 at edaa722), so a rank holds 2 bytes for each element of
// the whole parameters its partition overlaps, the paper's 2Ψ/N only
// where partitions end on parameter boundaries. Hand-counted for the
// fullest partition (replay/zero_grads.go), the stacks' parameters all of
// one size P: 2^22 elements (Ψ = 2^25) from N = 16 a partition lies
// inside one; for Ψ = 7.5e9, P = 1.25e8: N = 8 gives partitions of 7.5 P,
// each overlapping 8; N = 16, 3.75 P, the second [3.75 P, 7.5 P)
// overlapping 5; N = 64, 0.9375 P, overlapping 2.
func TestZeROStates(t *testing.T) {
	stage2 := map[[2]int64]int64{ // {Ψ, N}: elements of the whole parameters of the fullest partition, where not Ψ/N
		{1 << 25, 16}: 1 << 22, {1 << 25, 64}: 1 << 22,
		{7_500_000_000, 8}: 8 * 125_000_000, {7_500_000_000, 16}: 5 * 125_000_000, {7_500_000_000, 64}: 2 * 125_000_000,
	}
	for _, m := range []*core.Model{
		linearStack(4, 1024, 4096),   // Ψ = 2^25
		linearStack(30, 5000, 25000), // Ψ = 7.5e9
	} {
		psi := m.Params()
		for _, n := range []int64{1, 2, 4, 8, 16, 64} {
			for stage := 0; stage <= 3; stage++ {
				if stage > 0 && n == 1 && psi > 1<<30 {
					continue
				}
				rep := evalPlan(t, distPlan(t, m, "fp16-master", core.Parallelism{DP: n, Zero: stage}))
				want := replay.States{Params: 2 * psi, Grads: 2 * psi, Master: 4 * psi, Optimizer: 8 * psi}
				if stage >= 1 {
					want.Master, want.Optimizer = 4*psi/n, 8*psi/n
				}
				if stage >= 2 {
					want.Grads = 2 * psi / n
				}
				if whole, ok := stage2[[2]int64{psi, n}]; ok && stage == 2 {
					want.Grads = 2 * whole
				}
				if stage >= 3 {
					want.Params = 2 * psi / n
				}
				if rep.States != want {
					t.Errorf("Ψ=%d dp=%d zero=%d: states %+v, ZeRO paper %+v", psi, n, stage, rep.States, want)
				}
				if psi == 7_500_000_000 && n == 64 {
					total := float64(rep.States.Params+rep.States.Grads+rep.States.Master+rep.States.Optimizer) / 1e9
					paper := []float64{120, 31.40625, 16.640625, 1.875}[stage] // (2+2+12)Ψ, 4Ψ+12Ψ/N, 2Ψ+14Ψ/N, 16Ψ/N
					if stage == 2 {
						paper += 2 * (2*125_000_000 - 7.5e9/64) / 1e9 // the two whole parameters' gradients for 2Ψ/N: 16.90625
					}
					if total != paper {
						t.Errorf("Ψ=7.5B N=64 zero=%d: %.6g GB of states, ZeRO paper %.6g GB", stage, total, paper)
					}
				}
			}
		}
	}
}

// TestZeROPadding: DeepSpeed pads the flat group of ZeRO-1/2 to a multiple
// of 2*dp elements (stage_1_and_2.py, nccl_start_alignment_factor = 2) and
// ZeRO-3 partitions each parameter to ceil(numel/dp) elements. Stage 2's
// grads_in_partition holds the one parameter whole (TestZeROStates).
func TestZeROPadding(t *testing.T) {
	m := &core.Model{Name: "one", Layers: []core.Layer{&nn.Linear{In: 1000, Out: 1001}}, Loss: "mse", InputDim: 1000}
	// Ψ = 1,001,000; dp = 3: ZeRO-1/2 partition roundup(Ψ, 6)/3 = 333,668;
	// ZeRO-3 partition ceil(Ψ/3) = 333,667.
	for _, tc := range []struct {
		zero         int
		master, grad int64
	}{
		{1, 4 * 333_668, 2 * 1_001_000},
		{2, 4 * 333_668, 2 * 1_001_000},
		{3, 4 * 333_667, 2 * 333_667},
	} {
		rep := evalPlan(t, distPlan(t, m, "fp16-master", core.Parallelism{DP: 3, Zero: tc.zero}))
		if rep.States.Master != tc.master || rep.States.Optimizer != 2*tc.master || rep.States.Grads != tc.grad {
			t.Errorf("zero=%d: master %d optimizer %d grads %d, want %d %d %d", tc.zero,
				rep.States.Master, rep.States.Optimizer, rep.States.Grads, tc.master, 2*tc.master, tc.grad)
		}
	}
}

// TestDataParallelSavesNothing: plain DDP holds everything on every GPU,
// so its memory does not depend on dp (SEEDS story 3). DDP's buckets are
// there from dp=2 on; NCCL buffers sit outside the allocator.
func TestDataParallelSavesNothing(t *testing.T) {
	m := linearStack(4, 1024, 4096)
	base := evalPlan(t, distPlan(t, m, "bf16-mixed", core.Parallelism{DP: 2}))
	one := evalPlan(t, distPlan(t, m, "bf16-mixed", core.Parallelism{}))
	if got, want := base.PeakAllocated-one.PeakAllocated, 4*m.Params(); got != want {
		t.Errorf("dp=2 adds %d bytes to the peak, want the DDP buckets' %d (fp32 gradients)", got, want)
	}
	for _, n := range []int64{4, 8, 16, 64, 512} {
		rep := evalPlan(t, distPlan(t, m, "bf16-mixed", core.Parallelism{DP: n}))
		if rep.PeakAllocated != base.PeakAllocated || rep.PeakReserved != base.PeakReserved || rep.States != base.States {
			t.Errorf("dp=%d: peak %d reserved %d states %+v; dp=2: %d %d %+v", n,
				rep.PeakAllocated, rep.PeakReserved, rep.States, base.PeakAllocated, base.PeakReserved, base.States)
		}
	}
}

// TestZeRO3StatesFallAsOneOverDP: with ZeRO-3 every model state is
// partitioned, so the per-GPU states times dp stay the same.
func TestZeRO3StatesFallAsOneOverDP(t *testing.T) {
	m := linearStack(4, 1024, 4096)
	total := func(s replay.States) int64 { return s.Params + s.Grads + s.Master + s.Optimizer }
	one := total(evalPlan(t, distPlan(t, m, "fp16-master", core.Parallelism{Zero: 3})).States)
	if one != 16*m.Params() {
		t.Fatalf("zero=3 on one GPU: %d bytes of states, want 16Ψ = %d", one, 16*m.Params())
	}
	prev := int64(1) << 62
	for _, n := range []int64{2, 4, 8, 16, 32, 64} {
		rep := evalPlan(t, distPlan(t, m, "fp16-master", core.Parallelism{DP: n, Zero: 3}))
		if got := total(rep.States); got*n != one {
			t.Errorf("dp=%d: states %d x %d = %d, want %d", n, got, n, got*n, one)
		}
		if rep.PeakAllocated >= prev {
			t.Errorf("dp=%d: peak %d does not fall (dp/2: %d)", n, rep.PeakAllocated, prev)
		}
		prev = rep.PeakAllocated
	}
}

// TestShardedTraffic: ZeRO-3 moves 1.5x the bytes of plain data
// parallelism (SEEDS story 3; ZeRO paper section 7: all-gather Ψ in the
// forward and the backward and reduce-scatter Ψ, against an all-reduce of
// 2Ψ), with fp16 parameters and gradients on both sides.
func TestShardedTraffic(t *testing.T) {
	m := linearStack(4, 1024, 4096)
	for _, n := range []int64{2, 8, 64} {
		ddp := evalPlan(t, distPlan(t, m, "fp16-master", core.Parallelism{DP: n}))
		z3 := evalPlan(t, distPlan(t, m, "fp16-master", core.Parallelism{DP: n, Zero: 3}))
		if ddp.Traffic.Network == 0 || 2*z3.Traffic.Network != 3*ddp.Traffic.Network {
			t.Errorf("dp=%d: ZeRO-3 sends %d bytes, DDP %d: want 1.5x", n, z3.Traffic.Network, ddp.Traffic.Network)
		}
		want := []replay.Share{{Name: "all_reduce", Bytes: 2 * m.Params()}}
		if len(ddp.CommBytes) != 1 || ddp.CommBytes[0] != want[0] {
			t.Errorf("dp=%d: DDP comm_bytes %v, want %v", n, ddp.CommBytes, want)
		}
	}
}

// TestFSDPStates: FSDP2 keeps fp32 shards of parameters, gradients and
// Adam state (bf16-mixed: MixedPrecisionPolicy(param_dtype=bf16,
// reduce_dtype=fp32)), 16Ψ/N, and at most four blocks' worth of
// communication buffers at once (in bf16 block sizes), plus the root.
func TestFSDPStates(t *testing.T) {
	m := linearStack(8, 1024, 4096)
	psi := m.Params()
	for _, n := range []int64{2, 8} {
		rep, err := Evaluate(distPlan(t, m, "bf16-mixed", core.Parallelism{DP: n, FSDP: true}), core.Options{Timeline: true})
		if err != nil {
			t.Fatal(err)
		}
		want := replay.States{Params: 4 * psi / n, Grads: 4 * psi / n, Optimizer: 8 * psi / n}
		if rep.States != want {
			t.Errorf("dp=%d: states %+v, want %+v", n, rep.States, want)
		}
		// The most communication memory at any time: at a block's
		// pre-backward, its all-gather output (prefetched while the block
		// after it ran its backward; 16 MiB in bf16) copied out to its
		// unsharded parameters (16 MiB), while the block after it's
		// reduce-scatter input (fp32, 32 MiB) is kept until this block's
		// post_backward (torch 2.15's reduce_scatter_states; measured on
		// the CPU by tools/oracle/fsdp_live.py, fsdp_live_test.go): four
		// blocks. Before the input was kept and the copy-out waited for
		// the block's own pre-backward, it was two to three.
		var most int64
		for _, pt := range rep.Timeline {
			most = max(most, pt.ByCat[core.CatComm])
		}
		block := int64(2 * 2 * 1024 * 4096)
		if lo, hi := 4*block, 4*block+block/8; most < lo || most > hi {
			t.Errorf("dp=%d: at most %d bytes gathered, want %d..%d", n, most, lo, hi)
		}
	}
}

// TestMegatronDistributedOptimizer: bf16 parameters and fp32 main
// gradients in full, fp32 master weights and Adam state sharded: 6 + 12/dp
// bytes per parameter (calibration.md E4; 18 unsharded).
func TestMegatronDistributedOptimizer(t *testing.T) {
	m := linearStack(4, 1024, 4096)
	psi := m.Params()
	for _, n := range []int64{1, 2, 8} {
		rep := evalPlan(t, distPlan(t, m, "megatron", core.Parallelism{DP: n, DistributedOptimizer: true}))
		s := rep.States
		if got := s.Params + s.Grads + s.Master + s.Optimizer; got != 6*psi+12*psi/n {
			t.Errorf("dp=%d: %d bytes of states, want 6Ψ + 12Ψ/dp = %d", n, got, 6*psi+12*psi/n)
		}
	}
}
