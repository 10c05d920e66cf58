package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// randomSearches is how many seeded random searches
// TestSearchRandomEqualsBruteForce runs; MEMSH_SEARCH_RANDOM=N runs N
// (the seeds 1..N: a failure names its seed, and the same seed builds the
// same case).
const randomSearches = 8

// TestSearchRandomEqualsBruteForce: the search's rows and Pareto front
// are brute force's (sameAsBruteForce) on seeded random spaces of 8 GPUs,
// where the hand-written brute-force tests each hold one setting still:
// the precision (bf16, bf16-mixed, fp16-mixed, fp32), LoRA and QLoRA,
// FSDP1 or FSDP2 carried, a dense or MoE model, one node or two joined by
// a slow network (where the gathers and reductions the fast path sums are
// most of the step), the shardings, checkpointing and degrees of the
// space, and a GPU small enough that the bounds prune. Its first run
// found two defects a fast one-node network hid (a ZeRO layout priced
// with DDP's profile, quantized weights' gathers counted as bf16:
// TestProfileKeyAdapters, TestSearchQuantBoundBelowReplay).
func TestSearchRandomEqualsBruteForce(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every layout of each space")
	}
	n := testmodels.Draws(t, "MEMSH_SEARCH_RANDOM", randomSearches)
	ran := 0
	for seed := 1; seed <= n; seed++ {
		base, space, what := randomSearch(uint64(seed))
		t.Run(fmt.Sprintf("seed %d: %s", seed, what), func(t *testing.T) {
			res, err := Run(context.Background(), base, space)
			if err != nil {
				t.Skipf("the base plan is refused: %v", err) // counted below
			}
			sameAsBruteForce(t, base, space, res, replayAll(t, base, space))
			ran++
		})
	}
	if ran < n/2 {
		t.Errorf("only %d of %d random searches ran: the generator makes too many plans the search refuses", ran, n)
	}
}

// someOf draws a non-empty subset of xs, in their order.
func someOf[T any](r *rand.Rand, xs ...T) []T {
	var out []T
	for len(out) == 0 {
		for _, x := range xs {
			if r.IntN(2) == 0 {
				out = append(out, x)
			}
		}
	}
	return out
}

// randomSearch builds seed's base plan and space, and says what they are.
func randomSearch(seed uint64) (*core.Plan, Space, string) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	subset := func(xs ...string) []string { return someOf(r, xs...) }
	ints := func(xs ...int64) []int64 { return someOf(r, xs...) }
	model := testmodels.Llama(1024, 4, 16, 4, 2816, 32000, "flash")
	kind := "llama"
	if r.IntN(3) == 0 {
		model, kind = smallMoE(), "moe"
	}
	prec := pick("bf16-mixed", "bf16", "fp16-mixed", "fp32", "megatron")
	seq := []int64{256, 1024}[r.IntN(2)]
	base := testmodels.LlamaPlan(model, 1, seq, prec, "none", "H100-80GB")
	what := fmt.Sprintf("%s %s seq %d", kind, prec, seq)
	if r.IntN(2) == 0 {
		base.LoRA = &core.LoRA{Rank: 16, Alpha: 32, Targets: []string{"all-linear"}}
		what += ", lora"
		if (prec == "bf16" || prec == "bf16-mixed") && r.IntN(2) == 0 && prec != "megatron" {
			base.Quant, base.QuantStorage = "nf4", units.BF16
			what += " nf4"
		}
	}
	if r.IntN(3) == 0 && (base.Quant == "" || prec == "bf16") { // FSDP1 flattens one dtype a unit: QLoRA's codes in bf16 with bf16 parameters
		base.Parallel = core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1} // carried to the fsdp and hsdp layouts
		what += ", fsdp1"
	}
	if r.IntN(2) == 0 {
		gbps := []float64{1, 5, 25}[r.IntN(3)]
		base.Cluster = hw.Cluster{Nodes: 2, GPUsPerNode: 4, InterGBps: gbps}
		if base.Parallel.GPUs() == 1 {
			base.Parallel = core.Parallelism{DP: 8} // the base plan's layout on its cluster (the space replaces it)
		}
		what += fmt.Sprintf(", 2 nodes at %g GB/s", gbps)
	}
	switch r.IntN(6) { // settings the search carries into every layout
	case 0:
		if base.LoRA != nil { // float8 linears take no adapters
			break
		}
		base.Float8 = core.Float8{Scaling: "tensorwise"}
		what += ", float8"
	case 1:
		base.LossChunks = 4
		what += ", loss_chunks 4"
	case 2:
		base.Optimizer = core.Optimizer{Kind: []core.OptimizerKind{core.SGD, core.Lion, core.Adafactor, core.AdamW8bit}[r.IntN(4)], Momentum: 0.9}
		what += ", optimizer " + fmt.Sprint(base.Optimizer.Kind)
	}
	shardings := subset("ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp")
	if prec == "megatron" { // Megatron's own data parallelism: its DDP or distributed optimizer
		shardings = subset("megatron", "distopt")
	}
	gib := int64(2 + r.IntN(5))
	toyMemory(base, gib<<30)
	what += fmt.Sprintf(", %d GiB", gib)
	gpus, pps := int64(8), ints(1, 2)
	if r.IntN(4) == 0 { // 16 GPUs: pipelines of 4 stages, interleaved
		gpus, pps = 16, ints(1, 2, 4)
		if base.Parallel.GPUs() == 8 {
			base.Parallel.DP = 16
			if base.Cluster.Nodes == 2 {
				base.Cluster.GPUsPerNode = 8
			}
		}
	}
	space := Space{GPUs: gpus, GlobalBatch: 16, TP: ints(1, 2, 4), PP: pps, CP: ints(1, 2),
		MicroBatch: ints(1, 2), Sharding: shardings,
		CPModes:    subset("ring", "ulysses", "allgather"),
		Checkpoint: subset("none", "selective", "op", "full"), Top: 3, Workers: 2}
	if r.IntN(3) == 0 {
		space.Offload = subset("none", "optimizer", "params")
		if !slices.Contains(space.Offload, "none") { // ZeRO-Offload needs a zero sharding, params a zero3 or fsdp one
			space.Offload = append(space.Offload, "none")
		}
	}
	if !slices.ContainsFunc(space.CP, func(c int64) bool { return c > 1 }) {
		space.CPModes = nil // no layout reads them (checkIdleLists)
	}
	if base.Cluster.Nodes == 2 {
		space.GPUsPerNode = gpus / 2
	}
	what += fmt.Sprintf(", %d GPUs", gpus)
	what += fmt.Sprintf(", tp %v pp %v cp %v %v mbs %v %v %v offload %v", space.TP, space.PP, space.CP, space.CPModes, space.MicroBatch, space.Sharding, space.Checkpoint, space.Offload)
	return base, space, what
}

// The layouts the first random searches found priced apart from their
// replays, where the collectives are most of the step (sequences of 256
// tokens): HSDP's all-reduce across replicas (the replay's time model
// left the dp_replicate group out: 0.0094 s replayed, 0.0102 s by the
// fast path) and FSDP2 on pipeline stages (the stand-in gathered the
// units twice a micro-batch, where a stage holds them through the step:
// 0.0091 s replayed, 0.0098 s by the fast path).
func TestFastPathEqualsReplayCommBound(t *testing.T) {
	for _, par := range []core.Parallelism{
		{DP: 8, FSDP: true, DPReplicate: 4},
		{DP: 4, PP: 2, FSDP: true},
		{DP: 4, PP: 2, FSDP: true, DPReplicate: 2},
	} {
		p := testmodels.LlamaPlan(testmodels.Llama(1024, 4, 16, 4, 2816, 32000, "flash"), 1, 256, "bf16-mixed", "none", "H100-80GB")
		p.Parallel, p.GradAccum = par, 4
		r := replayAsFastPath(t, p)
		var fsdp float64
		for _, s := range r.Time.Breakdown {
			if s.Name == "fsdp_comm" {
				fsdp = s.Seconds
			}
		}
		t.Logf("%s: %.6g s, fsdp_comm %.6g s", par.String(), r.Time.StepSeconds, fsdp)
	}
}

// A vision-language model trained on text alone: ZeRO-3 and FSDP2 never
// gather or reduce its vision tower, which no op reads, and FSDP1 gathers
// only what it flattened into a unit that runs (the tower's patch
// embedding and merger in the root); the fast path prices the step as
// its replay does (core.ParamInfo.Unread, the stand-in's gathered), on a
// network slow enough that the gathers are most of it.
func TestFastPathIdleTower(t *testing.T) {
	data, err := os.ReadFile("../testdata/hf/qwen2.5-vl-tiny.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfig(data, "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	for _, par := range []core.Parallelism{
		{DP: 8, FSDP: true},
		{DP: 8, FSDP: true, FSDPVersion: 1},
		{DP: 8, Zero: 3},
		{DP: 8, Zero: 1},
	} {
		prec := "bf16-mixed"
		if par.FSDPVersion == 1 {
			prec = "bf16"
		}
		p := testmodels.LlamaPlan(m, 1, 256, prec, "none", "H100-80GB")
		p.Parallel, p.GradAccum = par, 2
		p.Cluster = hw.Cluster{Nodes: 2, GPUsPerNode: 4, InterGBps: 1}
		r := replayAsFastPath(t, p)
		t.Logf("%s: %.6g s, collectives %v", par.String(), r.Time.StepSeconds, r.CommBytes)
	}
}

// replayAsFastPath replays p and checks that the fast path prices its
// step as the replay does.
func replayAsFastPath(t *testing.T, p *core.Plan) *replay.Report {
	t.Helper()
	_, _, fe := fastPathOf(t, p)
	r, err := sim.Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if relDiff(fe.time.StepSeconds, r.Time.StepSeconds) > 1e-9 {
		t.Errorf("%s: fast path %.9g s, replay %.9g s", p.Parallel.String(), fe.time.StepSeconds, r.Time.StepSeconds)
	}
	return r
}
