package search

import (
	"os"
	"reflect"

	"context"
	"math"
	"runtime"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// llama3_70B is Llama-3-70B (80 layers, hidden 8192, 64 heads, 8 kv heads,
// FFN 28672, vocabulary 128,256).
func llama3_70B() *core.Model { return testmodels.Llama(8192, 80, 64, 8, 28672, 128256, "flash") }

// search70B is the issue's interactive case: Llama-3-70B on 1,024 H100s
// (128 nodes of 8), sequences of 8,192 tokens, 1,024 sequences (8M
// tokens) per step, Megatron's precision, over the default layout space.
func search70B(workers int) (*Result, error) {
	base := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	return Run(context.Background(), base, Space{GPUs: 1024, GlobalBatch: 1024, Top: 10, Workers: workers})
}

// BenchmarkSearchLlama70B1024 searches the full layout space of
// Llama-3-70B on 1,024 H100s; plans/s/core counts the layouts of the space
// over the time and the cores (GOMAXPROCS) used.
func BenchmarkSearchLlama70B1024(b *testing.B) {
	workers := runtime.GOMAXPROCS(0)
	var res *Result
	for i := 0; i < b.N; i++ {
		var err error
		if res, err = search70B(workers); err != nil {
			b.Fatal(err)
		}
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(res.Stats.Layouts+res.Stats.Invalid)/perOp/float64(workers), "plans/s/core")
	b.ReportMetric(float64(res.Stats.Replayed), "replays")
	b.ReportMetric(float64(res.Stats.StageDominated), "stage-dominated")
}

// The interactive case: every row fits, rows are fastest first, the
// best layouts keep tensor parallelism inside a node, and the front
// trades time for memory. (The whole space is examples/search_70b.star's,
// held by its golden; this test narrows checkpointing and the cp mode to
// keep CI short.)
func TestSearchLlama70B1024(t *testing.T) {
	if testing.Short() {
		t.Skip("searches the layout space of a 70B model")
	}
	base := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	res, err := Run(context.Background(), base, Space{GPUs: 1024, GlobalBatch: 1024, Top: 10, Workers: 2,
		Checkpoint: []string{"none", "full"}, CPModes: []string{"ring"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 10 || res.Stats.Layouts < 10000 || len(res.Front) < 10 {
		t.Fatalf("rows %d, front %d, stats %+v", len(res.Rows), len(res.Front), res.Stats)
	}
	// The front runs from the fastest layout to ever smaller ones, and
	// the fastest is on it.
	if res.Front[0].Report != res.Rows[0].Report {
		t.Errorf("the fastest layout is not the front's first")
	}
	for i := 1; i < len(res.Front); i++ {
		a, b := res.Front[i-1].Report, res.Front[i].Report
		if !(b.Time.StepSeconds > a.Time.StepSeconds && DeviceMemory(b) < DeviceMemory(a)) {
			t.Errorf("front %d (%.4g s, %d B) does not trade time for memory against %d (%.4g s, %d B)", i,
				b.Time.StepSeconds, DeviceMemory(b), i-1, a.Time.StepSeconds, DeviceMemory(a))
		}
	}
	for i, row := range res.Rows {
		r := row.Report
		if !r.Fits {
			t.Errorf("row %d does not fit", i)
		}
		if i > 0 && r.Time.StepSeconds < res.Rows[i-1].Report.Time.StepSeconds {
			t.Errorf("row %d is faster than row %d", i, i-1)
		}
		if tp := row.Plan.Parallel.Norm().TP; tp > 8 {
			t.Errorf("row %d: tp=%d crosses nodes", i, tp)
		}
		if r.Time.MFU < 0.25 || r.Time.MFU > 0.6 {
			t.Errorf("row %d: MFU %.3f outside the 25-60 %% band of a healthy large run", i, r.Time.MFU)
		}
	}
}

// llama3_405B is Llama 3.1 405B (126 layers, hidden 16,384, 128 heads, 8
// kv heads, FFN 53,248, vocabulary 128,256).
func llama3_405B() *core.Model {
	return testmodels.Llama(16384, 126, 128, 8, 53248, 128256, "flash")
}

// The Llama 3 paper's layout (Dubey et al. 2024, "The Llama 3 Herd of
// Models", Table 4): 16,384 H100s, sequences of 8,192 tokens, 16M tokens
// (2,048 sequences) per step, tp 8, pp 16, cp 1, dp 128, 400 TFLOP/s per
// GPU, BF16 MFU 41 %; one layer fewer on the first and the last stage
// (126 layers on 16 stages of 8, Megatron's embedding and loss slots).
// Searched around it (tp 4 or 8, pp 8 or 16, cp 1 or 2, micro-batch 1,
// every checkpoint policy, schedule and sharding), a layout with the
// paper's tensor and pipeline degrees is among the five fastest that fit
// (issue 26: "near the top"), and its MFU is within 5 points of the
// paper's. Since memsh lowers Megatron's fused norms and SwiGLU (less
// memory a stage), tp 8, pp 8, cp 2 interleaved fits and is 1.4 % faster
// (6.556 against 6.649 s); the step difference is logged, not bounded:
// the paper chose its layout for more than the step time. (memsh puts the paper's exact layout,
// cp 1 and no recompute, at 79-88 GiB a GPU, 102-114 GiB with the eager
// layers: the paper does not say how it fit 80 GB.)
func TestSearchLlama405BPaperLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("searches 405B layouts on 16,384 GPUs")
	}
	base := testmodels.LlamaPlan(llama3_405B(), 1, 8192, "megatron", "none", "H100-80GB")
	res, err := Run(context.Background(), base, Space{GPUs: 16384, GlobalBatch: 2048, TP: []int64{4, 8}, PP: []int64{8, 16},
		CP: []int64{1, 2}, MicroBatch: []int64{1}, Top: 5, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 {
		t.Fatalf("no layout fits: %+v", res.Stats)
	}
	fastest := res.Rows[0].Report.Time.StepSeconds
	var paper *Row
	for i := range res.Rows {
		par := res.Rows[i].Plan.Parallel.Norm()
		if par.TP == 8 && par.PP == 16 && par.EmbeddingSlot && par.LossSlot {
			paper = &res.Rows[i]
			break
		}
	}
	if paper == nil {
		t.Fatalf("no layout with the paper's tp 8 and pp 16 (a layer fewer on the first and last stage) among the %d fastest; the fastest is %s", len(res.Rows), res.Rows[0].Plan.Parallel.Norm())
	}
	par, step := paper.Plan.Parallel.Norm(), paper.Report.Time.StepSeconds
	t.Logf("fastest %s, %.3f s; the paper's degrees %s, %.3f s", res.Rows[0].Plan.Parallel.Norm(), fastest, par, step)
	if mfu := paper.Report.Time.MFU; math.Abs(mfu-0.41) > 0.05 {
		t.Errorf("%s: MFU %.3f, the paper's 0.41", par, mfu)
	}
}

// BenchmarkSearchLlama405B16384 searches the whole layout space of Llama
// 3.1 405B on 16,384 H100s, 2,048 sequences of 8,192 tokens a step.
func BenchmarkSearchLlama405B16384(b *testing.B) {
	workers := runtime.GOMAXPROCS(0)
	base := testmodels.LlamaPlan(llama3_405B(), 1, 8192, "megatron", "none", "H100-80GB")
	var res *Result
	for i := 0; i < b.N; i++ {
		var err error
		if res, err = Run(context.Background(), base, Space{GPUs: 16384, GlobalBatch: 2048, Top: 10, Workers: workers}); err != nil {
			b.Fatal(err)
		}
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(res.Stats.Layouts+res.Stats.Invalid), "layouts")
	b.ReportMetric(float64(res.Stats.Layouts+res.Stats.Invalid)/perOp/float64(workers), "plans/s/core")
	b.ReportMetric(float64(res.Stats.Replayed), "replays")
}

// BenchmarkSearchLlama405B49152 is the issue's space of a million
// layouts and more: Llama 3.1 405B on 49,152 H100s (2^14 x 3, so every
// degree has more divisors to take), 6,144 sequences of 8,192 tokens a
// step: 1,351,376 layouts, 1,159,760 of them rejected by the plan (the
// issue asks for under a minute on 2 cores).
func BenchmarkSearchLlama405B49152(b *testing.B) {
	workers := runtime.GOMAXPROCS(0)
	base := testmodels.LlamaPlan(llama3_405B(), 1, 8192, "megatron", "none", "H100-80GB")
	var res *Result
	for i := 0; i < b.N; i++ {
		var err error
		if res, err = Run(context.Background(), base, Space{GPUs: 49152, GlobalBatch: 6144, Top: 10, Workers: workers}); err != nil {
			b.Fatal(err)
		}
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(res.Stats.Layouts+res.Stats.Invalid), "layouts")
	b.ReportMetric(float64(res.Stats.Layouts+res.Stats.Invalid)/perOp/float64(workers), "plans/s/core")
	b.ReportMetric(float64(res.Stats.Replayed), "replays")
}

// BenchmarkEvaluateLlama70B3D replays one layout as search replays its
// rows: Llama-3-70B, TP 8 x PP 4 x DP 32 with the distributed optimizer,
// 8 micro-batches of one 8,192-token sequence (four stage replays).
func BenchmarkEvaluateLlama70B3D(b *testing.B) {
	p := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	p.GradAccum = 8
	p.Parallel = core.Parallelism{DP: 32, TP: 8, PP: 4, SequenceParallel: true, DistributedOptimizer: true}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := sim.Evaluate(p, core.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchEstimate is the fast path alone: the estimate and memory
// bound of one layout from its profile (the same layout as above).
func BenchmarkSearchEstimate(b *testing.B) {
	p := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	p.GradAccum = 8
	p.Parallel = core.Parallelism{DP: 32, TP: 8, PP: 4, SequenceParallel: true, DistributedOptimizer: true}
	pr, err := newProfile(p, partsFor(p.Parallel))
	if err != nil {
		b.Fatal(err)
	}
	sh, err := pr.shape(p.Parallel)
	if err != nil {
		b.Fatal(err)
	}
	nonTorch := nonTorchBytes(p)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pr.estimate(p, sh, nonTorch)
	}
}

// A model without a repeat() has no blocks to profile: the whole model is
// one unit, and there is no pipeline to search.
func TestSearchWithoutRepeat(t *testing.T) {
	m := &core.Model{Name: "flat", Layers: []core.Layer{
		&nn.Embedding{Name: "embed", Rows: 1000, Dim: 64},
		&nn.MLP{Dim: 64, Hidden: 256, Act: "gelu"},
	}, Vocab: 1000, Loss: "cross_entropy"}
	base := testmodels.LlamaPlan(m, 1, 128, "bf16-mixed", "none", "A100-80GB")
	res, err := Run(context.Background(), base, Space{GPUs: 8, GlobalBatch: 16, Top: 3, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 {
		t.Fatalf("%d rows, stats %+v", len(res.Rows), res.Stats)
	}
	for _, row := range res.Rows {
		if row.Plan.Parallel.Norm().PP != 1 {
			t.Errorf("pipeline without blocks: %v", row.Plan.Parallel)
		}
		pr, err := newProfile(row.Plan, partsFor(row.Plan.Parallel))
		if err != nil {
			t.Fatal(err)
		}
		sh, err := pr.shape(row.Plan.Parallel)
		if err != nil {
			t.Fatal(err)
		}
		fe := pr.estimate(row.Plan, sh, nonTorchBytes(row.Plan))
		if relDiff(fe.time.StepSeconds, row.Report.Time.StepSeconds) > 1e-9 {
			t.Errorf("%v: fast %.9g, replay %.9g", row.Plan.Parallel, fe.time.StepSeconds, row.Report.Time.StepSeconds)
		}
	}
}

// TestSearchExploresIssue18Modes: with sharding=["hsdp"] and both
// context-parallel modes the search enumerates HSDP layouts (sharded
// inside a node of 4, replicated across the 4 nodes), Ulysses layouts,
// and, for 8 blocks on pp=5, Megatron's embedding and loss slots; every
// row it returns is a full replay of its plan.
func TestSearchExploresIssue18Modes(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	space := Space{GPUs: 20, GPUsPerNode: 4, GlobalBatch: 40, TP: []int64{1}, PP: []int64{1, 5}, CP: []int64{1, 2},
		Sharding: []string{"fsdp", "hsdp"}, CPModes: []string{"ring", "ulysses"}, MicroBatch: []int64{1}, Checkpoint: []string{"full"},
		Virtual: []int64{1}, Workers: 2}
	res, err := Run(context.Background(), base, space)
	if err != nil {
		t.Fatal(err)
	}
	var hsdp, ulysses, slots bool
	for _, r := range res.Rows {
		par := r.Plan.Parallel
		hsdp = hsdp || (r.Sharding == "hsdp" && par.DPReplicate*4 == par.DP*par.CP)
		ulysses = ulysses || par.CPMode == "ulysses"
		slots = slots || (par.PP == 5 && par.EmbeddingSlot && par.LossSlot)
		if r.Sharding == "hsdp" && (par.DPReplicate <= 1 || par.DPReplicate >= par.DP*par.CP || par.DP%par.DPReplicate != 0) {
			t.Errorf("%s: HSDP with %d replicas of dp x cp = %d ranks", par, par.DPReplicate, par.DP*par.CP)
		}
	}
	if !hsdp || !ulysses || !slots {
		t.Errorf("rows with HSDP sharded over a node's 4 ranks %v, Ulysses %v, embedding and loss slots %v; want all (%d rows)", hsdp, ulysses, slots, len(res.Rows))
	}
}

// The search places DeepSeek-V3 (61 layers of MLA, 58 of them MoE with
// 256 experts) over expert parallelism: pipelines whose stages take the
// embedding and the loss as a block each (9 x 7 = 61 + 2), experts spread
// over 32 or 64 ranks.
func TestSearchDeepSeekV3ExpertParallel(t *testing.T) {
	data, err := os.ReadFile("../testdata/hf/deepseek-v3.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfig(data, "flash")
	if err != nil {
		t.Fatal(err)
	}
	p := testmodels.LlamaPlan(m, 1, 4096, "megatron", "full", "H100-80GB")
	res, err := Run(context.Background(), p, Space{GPUs: 2304, GlobalBatch: 4096, TP: []int64{1}, PP: []int64{9},
		EP: []int64{32, 64}, MicroBatch: []int64{1}, Checkpoint: []string{"full"}, Virtual: []int64{1}, Top: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 {
		t.Fatalf("no layout fits: %+v", res.Stats)
	}
	for _, row := range res.Rows {
		if row.Plan.Parallel.EP < 32 || !row.Report.Fits {
			t.Errorf("row %+v: want a fitting layout with ep >= 32", row.Plan.Parallel)
		}
	}
}

// A stage's units summed in one pass (stageUnits, what fill does) are
// the chain of adds that defines them, figure for figure and list for
// list: chunk by chunk, each chunk its base plus its blocks; the stages
// of one profile summed in one room keep lists of their own (compared
// once all are summed), and a shape filled again in that room is the
// shape filled alone.
func TestStageUnitsEqualChainedSums(t *testing.T) {
	stages := 0
	for i, p := range fastPathPlans() {
		if p.Parallel.Norm().PP <= 1 {
			continue
		}
		pr, err := newProfile(p, stageUnits)
		if err != nil {
			t.Fatal(err)
		}
		if pr.mixed {
			continue
		}
		sh, err := pr.shape(p.Parallel)
		if err != nil {
			t.Fatal(err)
		}
		room := &stageRoom{}
		looked := &stageRoom{of: pr} // as a room that found two collectives alike: mergeComm's lookups
		got := make([]unitSums, len(sh.chunks))
		for k, cks := range sh.chunks {
			got[k] = pr.stageUnits(cks, room)
		}
		sh.fillCompute(pr) // the stages' compute alone, what Run bounds the step time by
		for k := range got {
			if sh.compute[k] != got[k].ct {
				t.Errorf("%d:%s stage kind %d: compute alone %+v, in the stage's units %+v", i, p.Parallel, k, sh.compute[k], got[k].ct)
			}
		}
		if room.sums == nil {
			t.Errorf("%d:%s: the collectives were not numbered", i, p.Parallel)
		}
		for k, cks := range sh.chunks {
			var want unitSums
			for _, ck := range cks {
				want = want.add(pr.chunk(ck), 1)
			}
			if !reflect.DeepEqual(got[k], want) {
				t.Errorf("%d:%s stage kind %d: one pass\n%+v\nchained\n%+v", i, p.Parallel, k, got[k], want)
			}
			if l := pr.stageUnits(cks, looked); !reflect.DeepEqual(l, want) {
				t.Errorf("%d:%s stage kind %d: looked up\n%+v\nchained\n%+v", i, p.Parallel, k, l, want)
			}
			stages++
		}
		alone, err := pr.shape(p.Parallel)
		if err != nil {
			t.Fatal(err)
		}
		alone.fill(pr)
		sh.fillIn(pr, room) // the room has summed these stages
		if !reflect.DeepEqual(sh.stages, alone.stages) || !reflect.DeepEqual(sh.stages, got) {
			t.Errorf("%d:%s: a shape filled in a used room differs from one filled alone", i, p.Parallel)
		}
	}
	if stages < 20 {
		t.Errorf("%d stage kinds compared: the plans lost their pipelines", stages)
	}
}

// heldFor counts each chunk's forwards in flight as a walk over them
// does (forward j runs the stage's chunk (j mod pp*v) div pp).
func TestHeldForCountsForwards(t *testing.T) {
	for pp := int64(1); pp <= 7; pp++ {
		for v := int64(1); v <= 4; v++ {
			saved := make([]int64, pp*v)
			for g := range saved {
				saved[g] = int64(1+g) * 1000003 // distinct, so a miscounted chunk shows
			}
			for s := int64(0); s < pp; s++ {
				for n := int64(0); n <= 3*pp*v+2; n++ {
					var want int64
					for j := range n {
						want += saved[(j%(pp*v))/pp*pp+s]
					}
					if got := heldFor(saved, pp, v, s, n); got != want {
						t.Errorf("pp %d v %d stage %d, %d in flight: %d, walked %d", pp, v, s, n, got, want)
					}
				}
			}
		}
	}
}
