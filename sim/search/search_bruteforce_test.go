package search

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// replayed is one layout of a space, replayed in full, with its fast
// estimate.
type replayed struct {
	name   string
	est    fastEstimate
	report *replay.Report
}

// enumerated is space with its defaults filled in from base, and every
// layout of it.
func enumerated(t *testing.T, base *core.Plan, space Space) (Space, []layout) {
	t.Helper()
	full, err := space.defaults(base)
	if err != nil {
		t.Fatal(err)
	}
	layouts, _, err := full.enumerate(base)
	if err != nil {
		t.Fatal(err)
	}
	return full, layouts
}

// replayAll checks, estimates and replays every layout of space (small
// enough to replay whole); a layout whose replay refuses it
// (core.LayoutError) is left out, as the plan's refusals are.
func replayAll(t *testing.T, base *core.Plan, space Space) []replayed {
	t.Helper()
	full, layouts := enumerated(t, base, space)
	var out []replayed
	for _, l := range layouts {
		p := full.plan(base, l)
		if p.Validate() != nil {
			continue
		}
		r, err := (&hostChecks{}).evaluate(p, core.Options{}, func(q *core.Plan) (*replay.Report, error) { return sim.Evaluate(q, core.Options{}) })
		if layoutRefusal(err) != nil {
			continue // its replay refuses the layout (core.LayoutError): Run rejects it
		}
		if err != nil {
			t.Fatal(err)
		}
		q := p // the profile's plan: Run lowers a params-offloaded layout's profile without its offload
		if l.offload.timedByReplay() {
			c := *p
			c.Offload = base.Offload
			q = &c
		}
		pr, err := newProfile(q, partsFor(p.Parallel))
		if err != nil {
			t.Fatal(err)
		}
		sh, err := pr.shape(p.Parallel)
		if err != nil {
			t.Fatal(err)
		}
		est := pr.estimate(p, sh, nonTorchBytes(p))
		if timedByItsReplay(p, l) {
			est.time = r.Time // Run times it by its replay (search.go, exact)
		}
		if b := pr.stepBound(p, sh, !timedByItsReplay(p, l)); b > est.time.StepSeconds {
			t.Errorf("%s: the walk's lower bound of the step time %.17g s is above its time %.17g s", rowName(p, full.Sharding[l.sharding]), b, est.time.StepSeconds)
		}
		out = append(out, replayed{name: rowName(p, full.Sharding[l.sharding]), est: est, report: r})
	}
	return out
}

func rowName(p *core.Plan, sharding string) string {
	return fmt.Sprintf("%s %s %s mbs%d", p.Parallel, sharding, p.Checkpoint.Mode, p.Batch)
}

// Search returns what replaying every layout of the space would: the
// fastest fitting layouts and the Pareto front of step time and memory;
// and it pruned only layouts that do not fit (on a space small enough to
// replay whole).
func TestSearchEqualsBruteForce(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(base, 3<<30) // small enough that memory prunes
	space := Space{GPUs: 16, GlobalBatch: 64, TP: []int64{1, 4}, PP: []int64{1, 2, 4}, CP: []int64{1, 2},
		MicroBatch: []int64{1, 2}, Virtual: []int64{1, 2}, Sharding: []string{"ddp", "zero1", "zero3"},
		CPModes: []string{"ring"}, Top: 8, Workers: 2}
	checkBruteForce(t, base, space, true)
}

// The same for a MoE over expert parallelism and both experts' tensor
// parallelisms (expert_tp 1 and tp): the memory bound holds for whole
// experts too, nothing that fits is pruned, and the rows and the front
// are brute force's. Some of the fastest layouts and of the front keep
// their experts whole, so the dimension is not idle.
func TestSearchMoEEqualsBruteForce(t *testing.T) {
	base := testmodels.LlamaPlan(smallMoE(), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(base, 3<<30) // small enough that memory prunes
	space := Space{GPUs: 8, GlobalBatch: 16, TP: []int64{1, 2, 4}, PP: []int64{1, 2}, CP: []int64{1},
		MicroBatch: []int64{1, 2}, Virtual: []int64{1}, Sharding: []string{"ddp", "zero1", "zero3"},
		Checkpoint: []string{"none", "full"}, Top: 8, Workers: 2}
	res := checkBruteForce(t, base, space, true)
	whole := 0
	for _, r := range append(append([]Row(nil), res.Rows...), res.Front...) {
		if r.Plan.Parallel.ETP == 1 {
			whole++
		}
	}
	if whole == 0 {
		t.Errorf("no row or front layout keeps its experts whole (expert_tp=1)")
	}
	t.Logf("%+v, %d rows and front layouts with whole experts", res.Stats, whole)
}

// The same with ZeRO-Offload in the space (offload=["none",
// "optimizer"]): an offloaded layout's bound (its 16-bit parameters, no
// master, moments or gradient partition on the GPU) stays below its
// replay, nothing that fits is pruned, and offloaded layouts, slower and
// smaller, join the front brute force finds.
func TestSearchOffloadEqualsBruteForce(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(base, 9<<29) // 4.5 GiB: small enough that both bounds prune
	space := Space{GPUs: 8, GlobalBatch: 16, TP: []int64{1, 2}, PP: []int64{1}, CP: []int64{1},
		MicroBatch: []int64{1, 2}, Sharding: []string{"ddp", "zero1", "zero2", "zero3"}, Offload: []string{"none", "optimizer"},
		Top: 6, Workers: 2}
	res := checkBruteForce(t, base, space, false)
	offloaded := 0
	for _, r := range res.Front {
		if r.Plan.Offload != nil {
			offloaded++
		}
	}
	if offloaded == 0 {
		t.Errorf("no offloaded layout on the front")
	}
	t.Logf("%+v, %d offloaded layouts on the front of %d", res.Stats, offloaded, len(res.Front))
}

// The same from a base plan with overlap_comm (carried into the zero1
// and zero2 layouts): ZeRO-Offload's copies run on the reduction stream
// behind each micro-step's backward, in the fast path as in the replay.
// A 1.7B model, so that a rank's partition spans several of
// reduce_bucket_size's buckets (the fast path priced every copy exposed
// before: 0.608 s against the replay's 0.579 s at zero1, dp=8).
func TestSearchOffloadOverlapCommEqualsBruteForce(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(4096, 8, 32, 8, 14336, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(base, 16<<30)
	base.Parallel = core.Parallelism{DP: 8, Zero: 2, OverlapComm: true}
	base.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: 8}
	space := Space{GPUs: 8, GlobalBatch: 64, TP: []int64{1, 2}, PP: []int64{1}, CP: []int64{1},
		MicroBatch: []int64{1, 2, 4, 8}, Sharding: []string{"zero1", "zero2"}, Offload: []string{"none", "optimizer"},
		Top: 4, Workers: 2}
	res := checkBruteForce(t, base, space, false)
	offloaded := 0
	for _, r := range res.Front {
		if r.Plan.Offload != nil && r.Plan.Parallel.OverlapComm {
			offloaded++
		}
	}
	if offloaded == 0 {
		t.Errorf("no offloaded layout with overlap_comm on the front")
	}
	t.Logf("%+v, %d offloaded layouts on the front of %d", res.Stats, offloaded, len(res.Front))
}

// The same with the parameters on the host in the space (offload=["none",
// "params"]: ZeRO-3's offload_param and FSDP2's CPUOffloadPolicy): the
// bound of a params-offloaded layout (no model state on the GPU) stays
// below its replay, the walk orders it by its replay's time, nothing
// that fits is pruned, and offloaded layouts join the front brute force
// finds.
func TestSearchParamsOffloadEqualsBruteForce(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	toyMemory(base, 3<<30) // small enough that both bounds prune
	space := Space{GPUs: 8, GlobalBatch: 16, TP: []int64{1, 2}, PP: []int64{1}, CP: []int64{1},
		MicroBatch: []int64{1, 2}, Sharding: []string{"ddp", "zero1", "zero3", "fsdp"}, Offload: []string{"none", "params"},
		Top: 6, Workers: 2}
	res := checkBruteForce(t, base, space, false)
	offloaded := 0
	for _, r := range res.Front {
		if o := r.Plan.Offload; o != nil {
			if o.Params != "cpu" || (r.Sharding != "zero3" && r.Sharding != "fsdp") {
				t.Errorf("%s: offload %+v on %s", r.Plan.Parallel, *o, r.Sharding)
			}
			offloaded++
		}
	}
	if offloaded == 0 {
		t.Errorf("no params-offloaded layout on the front")
	}
	if res.Stats.TimedByReplay < offloaded {
		t.Errorf("%d params-offloaded layouts timed by a replay, %d of them on the front", res.Stats.TimedByReplay, offloaded)
	}
	t.Logf("%+v, %d params-offloaded layouts on the front of %d", res.Stats, offloaded, len(res.Front))
}

// checkBruteForce runs the search of space and replays every layout of
// it: the search's rows and front are brute force's, every memory bound
// is below its replay, and nothing that fits was pruned.
func checkBruteForce(t *testing.T, base *core.Plan, space Space, stageDominated bool) *Result {
	t.Helper()
	res, err := Run(context.Background(), base, space)
	if err != nil {
		t.Fatal(err)
	}
	all := replayAll(t, base, space)
	fits, want := sameAsBruteForce(t, base, space, res, all)
	if len(fits) < space.Top {
		t.Fatalf("%d fitting layouts of %d, want at least %d", len(fits), len(all), space.Top)
	}
	if res.Stats.PrunedStates+res.Stats.PrunedMemory == 0 || res.Stats.Replayed >= len(all) {
		t.Errorf("search pruned nothing or replayed everything: %+v", res.Stats)
	}
	if len(want) < 2 {
		t.Fatalf("brute force's front has %d layouts, want at least 2", len(want))
	}
	if res.Stats.Dominated == 0 {
		t.Errorf("the front's walk replayed every layout: %+v", res.Stats)
	}
	if stageDominated && res.Stats.StageDominated == 0 {
		t.Errorf("no pipelined layout was shown dominated by one stage's replay: %+v", res.Stats)
	}
	return res
}

// sameAsBruteForce checks a search's result res against every layout of
// its space replayed (all): each layout's fast path is its replay's step
// time and its memory bound is below the replay's; none the bounds prune
// fits; the rows are the Top fastest layouts that fit (all of them when
// fewer fit) and the front is the replays' Pareto front. It returns the
// fitting layouts, fastest first, and that front.
func sameAsBruteForce(t *testing.T, base *core.Plan, space Space, res *Result, all []replayed) (fits, want []replayed) {
	t.Helper()
	for _, r := range all {
		if r.report.Fits {
			fits = append(fits, r)
		}
		if relDiff(r.est.time.StepSeconds, r.report.Time.StepSeconds) > 1e-9 {
			t.Errorf("%s: fast path %.9g s, replay %.9g s", r.name, r.est.time.StepSeconds, r.report.Time.StepSeconds)
		}
		if r.est.minDevice > DeviceMemory(r.report) || r.est.minStates > r.est.minDevice {
			t.Errorf("%s: memory bound states %d, states and activations %d, replay %d", r.name, r.est.minStates, r.est.minDevice, DeviceMemory(r.report))
		}
		if (r.est.minDevice > base.Device.Memory || r.est.minStates > base.Device.Memory) && r.report.Fits {
			t.Errorf("%s: pruned by its bound (%d, %d) but fits (%d)", r.name, r.est.minStates, r.est.minDevice, DeviceMemory(r.report))
		}
	}
	sort.SliceStable(fits, func(i, j int) bool { return fits[i].report.Time.StepSeconds < fits[j].report.Time.StepSeconds })
	if rows := min(space.Top, len(fits)); len(res.Rows) != rows {
		t.Fatalf("%d fitting layouts of %d, search returned %d rows, want %d", len(fits), len(all), len(res.Rows), rows)
	}
	if res.Stats.Layouts != len(all) {
		t.Errorf("search counted %d layouts, brute force %d", res.Stats.Layouts, len(all))
	}
	for i, row := range res.Rows {
		if got := row.Report.Time.StepSeconds; relDiff(got, fits[i].report.Time.StepSeconds) > 1e-9 {
			t.Errorf("row %d: search %s %.6g s, brute force %s %.6g s", i, rowName(row.Plan, row.Sharding), got, fits[i].name, fits[i].report.Time.StepSeconds)
		}
	}
	// The brute-force front: fastest first, each needing less memory
	// than every faster one; then of those as fast as each other
	// (asFast: replays that tie but for their last bits) the one needing
	// least memory.
	var less []replayed
	for _, r := range fits {
		if len(less) == 0 || DeviceMemory(r.report) < DeviceMemory(less[len(less)-1].report) {
			less = append(less, r)
		}
	}
	for i, r := range less {
		if !slices.ContainsFunc(less[i+1:], func(s replayed) bool {
			return asFast(s.report.Time.StepSeconds, r.report.Time.StepSeconds)
		}) {
			want = append(want, r)
		}
	}
	if len(res.Front) != len(want) {
		for _, f := range res.Front {
			t.Logf("search %s %.9g %d", rowName(f.Plan, f.Sharding), f.Report.Time.StepSeconds, DeviceMemory(f.Report))
		}
		for _, f := range want {
			t.Logf("brute  %s %.9g %d", f.name, f.report.Time.StepSeconds, DeviceMemory(f.report))
		}
		t.Fatalf("front of %d layouts, brute force %d", len(res.Front), len(want))
	}
	for i, f := range res.Front {
		if !asFast(f.Report.Time.StepSeconds, want[i].report.Time.StepSeconds) || !asFast(want[i].report.Time.StepSeconds, f.Report.Time.StepSeconds) ||
			DeviceMemory(f.Report) != DeviceMemory(want[i].report) {
			t.Errorf("front %d: search %s (%.6g s, %d B), brute force %s (%.6g s, %d B)", i, rowName(f.Plan, f.Sharding),
				f.Report.Time.StepSeconds, DeviceMemory(f.Report), want[i].name, want[i].report.Time.StepSeconds, DeviceMemory(want[i].report))
		}
	}
	return fits, want
}
