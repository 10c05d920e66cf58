package builtins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/jsondoc"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// runScript executes src with st attached and returns its globals.
func runScript(t *testing.T, st *host.State, src string) (starlark.StringDict, error) {
	t.Helper()
	thread := &starlark.Thread{Name: "test"}
	st.Attach(thread)
	return starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true, GlobalReassign: true}, thread, "e.star", src, Predeclared())
}

func TestEmitPrints(t *testing.T) {
	var out bytes.Buffer
	g, err := runScript(t, &host.State{Out: &out}, reportPrelude+`
emit(r)
emit(r, label = "again")
emit({"peak": r.peak_allocated}, label = "figures")
emit("a string")
emit([1, 2])
`)
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	table := g["r"].(*reports.Report).String() + "\n"
	peak := g["r"].(*reports.Report).SimReport().PeakAllocated
	want := table + "again:\n" + table + fmt.Sprintf("figures: {\"peak\": %d}\n", peak) + "a string\n[1, 2]\n"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("printed (-want +got):\n%s", d)
	}
}

func TestEmitHook(t *testing.T) {
	var got []host.Emitted
	var simulated []host.Simulation
	st := &host.State{
		Emit:      func(_ *starlark.Thread, e host.Emitted) error { got = append(got, e); return nil },
		Simulated: func(r host.Simulation) { simulated = append(simulated, r) },
	}
	g, err := runScript(t, st, reportPrelude+`
emit(r, label = "r")
emit(1)
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Value != g["r"] || got[0].Label != "r" || got[1].Value != starlark.MakeInt(1) {
		t.Fatalf("emitted %v", got)
	}
	if pos := host.PosString(got[0].At); pos != "e.star:7:5" {
		t.Errorf("position of emit(r) = %s, want e.star:7:5", pos)
	}
	// Two simulate() calls in the prelude: r, then small.
	if len(simulated) != 2 || simulated[0] != g["r"].(host.Simulation) || simulated[1] != g["small"].(host.Simulation) {
		t.Errorf("simulated hook saw %d reports", len(simulated))
	}
}

func TestEmitAndExpectErrors(t *testing.T) {
	runPreludeCases(t, reportPrelude, []evalCase{
		{expr: "emit(len)", err: "cannot emit builtin_function_or_method: cannot encode builtin_function_or_method as JSON (emit takes a report, a table, or a value json.encode accepts: use r.as_dict() for a report inside one)"},
		{expr: "emit({\"r\": r})", err: "cannot emit dict: "},
		{expr: "emit(r, label = 3)", err: "label must be a string (got int)"},
		{expr: "expect(r.fits, \"should fit\")", want: "None"},
		{expr: "expect(small.fits, \"2 MiB is too small\")", err: "expectation failed: 2 MiB is too small"},
		{expr: "expect(False)", err: "expectation failed"},
		{expr: "expect(r.peak_allocated, \"budget\")", err: "cond must be a bool (got int): compare explicitly"},
		{expr: "expect(True, 3)", err: "msg must be a string (got int)"},
	})
}

// TestJSONDocumentRoundTrip decodes the JSON of reports (one that fits,
// with its timeline, and one that runs out of memory) and compares every
// field of the JSON report (docs/json.md) with the Go report.
func TestJSONDocumentRoundTrip(t *testing.T) {
	g, err := runScript(t, &host.State{}, reportPrelude+`
t = simulate(p, timeline = True)
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t", "small"} {
		t.Run(name, func(t *testing.T) {
			x := g[name].(*reports.Report)
			thread := &starlark.Thread{}
			(&host.State{}).Attach(thread)
			line, err := JSONDocument(thread, host.Emitted{Value: x, Label: "l", At: syntax.MakePosition(&[]string{"e.star"}[0], 3, 1)})
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(line, []byte("\n")) {
				t.Errorf("document spans lines")
			}
			var doc jsondoc.Doc
			if err := json.Unmarshal(line, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Version != 1 || doc.Kind != "report" || doc.Label != "l" || doc.At != "e.star:3:1" || doc.Report == nil {
				t.Fatalf("envelope: %+v", doc)
			}
			if d := cmp.Diff(wantDocument(x), *doc.Report); d != "" {
				t.Errorf("report (-want +got):\n%s", d)
			}
		})
	}
}

// wantDocument is the schema's form of a report, field by field from the
// Go report.
// hostBreakdown is r.host_breakdown as the JSON document has it.
func hostBreakdown(rows []replay.Share) map[string]int64 {
	m := map[string]int64{}
	for _, s := range rows {
		m[s.Name] += s.Bytes
	}
	return m
}

func wantDocument(x *reports.Report) jsondoc.Report {
	r := x.SimReport()
	alloc := func(a replay.Alloc) jsondoc.Alloc {
		return jsondoc.Alloc{Tensor: a.Tensor, Op: a.Op, Shape: append([]int64{}, a.Shape...), DType: a.DType.Name(), Bytes: a.Bytes, Why: a.Why, Phase: a.Phase.String()}
	}
	// Time figures are null without a finite step time (a GPU without
	// throughput figures), as in as_dict.
	f := func(v float64) *float64 {
		if !x.HasTime() {
			return nil
		}
		return &v
	}
	var comm *int64
	if x.HasTime() {
		comm = &r.Traffic.Network
	}
	w := jsondoc.Report{
		Model: x.Plan().SimPlan().Model.Name, GPU: x.Plan().SimPlan().Device.Name, Plan: x.Plan().String(),
		Fits: r.Fits, PeakAllocated: r.PeakAllocated, PeakReserved: r.PeakReserved, DeviceUsed: r.DeviceUsed,
		Capacity: r.Capacity, SMITotal: x.Plan().SimPlan().Device.SMITotal(), Headroom: r.Headroom, AllocRetries: r.AllocRetries, Breakdown: map[string]int64{},
		PeakAt:           jsondoc.PeakAt{Phase: r.PeakAt.Phase.String(), Op: r.PeakAt.Op},
		Largest:          alloc(r.Largest),
		States:           jsondoc.States{Params: r.States.Params, Grads: r.States.Grads, Master: r.States.Master, Optimizer: r.States.Optimizer},
		SavedActivations: r.SavedActivations, SavedWeightCopies: r.SavedWeightCopies, HostMemory: r.HostMemory, HostBreakdown: hostBreakdown(r.HostBreakdown),
		Traffic:  jsondoc.Traffic{HBM: r.Traffic.HBM, PCIe: r.Traffic.PCIe, NVMe: r.Traffic.NVMe, Network: r.Traffic.Network},
		StepTime: f(r.Time.StepSeconds), MFU: f(r.Time.MFU), HFU: f(r.Time.HFU), TokensPerS: f(r.Time.TokensPerS), CommBytes: comm,
		SamplesPerS: f(r.Time.TokensPerS / float64(max(x.Plan().SimPlan().Seq, 1)*max(x.Plan().SimPlan().Members, 1))),
		Params:      r.Params, TrainableParams: r.TrainableParams,
		Tables: []json.RawMessage{}, Notes: append([]string{}, r.Notes...), Ranks: []jsondoc.Report{},
	}
	if w.Largest.Shape == nil {
		w.Largest.Shape = []int64{}
	}
	var sum int64
	for _, s := range r.Breakdown {
		w.Breakdown[s.Name] = s.Bytes
		sum += s.Bytes
	}
	// The rows beyond the peak's: paged optimizer state, then the reserve
	// grown later, so that the breakdown sums to device_used.
	if x.Plan().SimPlan().Optimizer.Paged() {
		w.Breakdown["paged_optimizer"] = r.States.Optimizer
	} else {
		w.Breakdown["paged_optimizer"] = 0
	}
	w.Breakdown["reserved_later"] = r.DeviceUsed - sum - w.Breakdown["paged_optimizer"]
	fr := r.Frag
	w.Fragmentation = jsondoc.Fragmentation{FreeBlocks: fr.AtPeak[0].Blocks + fr.AtPeak[1].Blocks,
		FreeBytes: fr.AtPeak[0].Bytes + fr.AtPeak[1].Bytes, LargestFree: max(fr.AtPeak[0].Largest, fr.AtPeak[1].Largest)}
	if g := fr.PeakGrowth; g != nil {
		w.Fragmentation.PeakGrowth = &jsondoc.PeakGrowth{Tensor: g.Alloc.Tensor, Op: g.Alloc.Op, Phase: g.Alloc.Phase.String(),
			Bytes: g.Growth.Request, CachedBlocks: g.Growth.Cache.Blocks, CachedBytes: g.Growth.Cache.Bytes,
			LargestCached: g.Growth.Cache.Largest, Reserved: g.Reserved}
	}
	if r.OOM != nil {
		w.OOM = &jsondoc.OOM{Alloc: alloc(r.OOM.Alloc), Message: r.OOM.Message}
	}
	if x.HasTime() {
		w.TimeBreakdown = map[string]float64{}
		for _, s := range r.Time.Breakdown {
			w.TimeBreakdown[s.Name] = s.Seconds
		}
	}
	for _, m := range r.Time.Modules {
		if !x.HasTime() {
			break
		}
		if w.Modules == nil {
			w.Modules = []jsondoc.Module{}
		}
		w.Modules = append(w.Modules, jsondoc.Module{Name: m.Name, Count: m.Count, FLOPs: m.FLOPs, Bytes: m.Bytes,
			Forward: m.Forward, Backward: m.Backward, Recompute: m.Recompute, Launch: m.Launch, Seconds: m.Seconds, Bound: m.Bound})
	}
	for _, p := range r.Timeline {
		w.Timeline = append(w.Timeline, jsondoc.Point{Phase: p.Phase.String(), Op: p.Op, Allocated: p.Allocated, Reserved: p.Reserved,
			Params: p.ByCat[core.CatParams], Grads: p.ByCat[core.CatGrads], Optimizer: p.ByCat[core.CatOptimizer],
			Activations: p.ByCat[core.CatActivations], Temporaries: p.ByCat[core.CatTemporaries], Comm: p.ByCat[core.CatComm]})
	}
	return w
}

// TestJSONMatchesAsDict checks that the JSON report has exactly the keys
// of r.as_dict(), so the schema (jsondoc.Report, docs/json.md) follows
// the Starlark attributes: a new attribute in as_dict fails here until
// the schema has it.
func TestJSONMatchesAsDict(t *testing.T) {
	g, err := runScript(t, &host.State{}, reportPrelude+`
d = json.encode(simulate(p, timeline = True).as_dict())
t = simulate(p, timeline = True)
`)
	if err != nil {
		t.Fatal(err)
	}
	thread := &starlark.Thread{}
	(&host.State{}).Attach(thread)
	rep, err := ReportDocument(thread, g["t"].(*reports.Report))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	keys := func(js []byte) []string {
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatal(err)
		}
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	if d := cmp.Diff(keys([]byte(g["d"].(starlark.String))), keys(b)); d != "" {
		t.Errorf("keys of as_dict (-) and of the JSON report (+) differ; update jsondoc.Report and docs/json.md:\n%s", d)
	}
}

func TestJSONDocumentValue(t *testing.T) {
	thread := &starlark.Thread{}
	(&host.State{}).Attach(thread)
	d := starlark.NewDict(1)
	d.SetKey(starlark.String("a<b"), starlark.MakeInt(1))
	line, err := JSONDocument(thread, host.Emitted{Value: d})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(line), `{"version":1,"kind":"value","at":"","value":{"a<b":1}}`; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestSparklineOnTerminal(t *testing.T) {
	g, err := runScript(t, &host.State{}, reportPrelude)
	if err != nil {
		t.Fatal(err)
	}
	r := g["r"].(*reports.Report)
	for _, color := range []bool{false, true} {
		var b strings.Builder
		if err := r.Render(&b, color); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(b.String(), "\n")
		var spark string
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "timeline") {
				spark = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "timeline"))
			}
		}
		if !color {
			if spark != "" {
				t.Errorf("sparkline without colour (a pipe or a golden): %q", spark)
			}
			continue
		}
		if n := len([]rune(spark)); n != reports.SparkWidth {
			t.Errorf("sparkline has %d columns, want %d: %q", n, reports.SparkWidth, spark)
		}
		if !strings.ContainsRune(spark, '█') {
			t.Errorf("sparkline never reaches the peak: %q", spark)
		}
	}
}

func TestWithTimeline(t *testing.T) {
	g, err := runScript(t, &host.State{}, reportPrelude+`
t = simulate(p, timeline = True)
`)
	if err != nil {
		t.Fatal(err)
	}
	r, tl := g["r"].(*reports.Report), g["t"].(*reports.Report)
	got, err := r.WithTimeline()
	if err != nil {
		t.Fatal(err)
	}
	if got == r.SimReport() || len(got.Timeline) != len(tl.SimReport().Timeline) || got.PeakAllocated != r.SimReport().PeakAllocated {
		t.Errorf("replay: %d events, peak %d; want %d events, peak %d", len(got.Timeline), got.PeakAllocated, len(tl.SimReport().Timeline), r.SimReport().PeakAllocated)
	}
	if same, _ := tl.WithTimeline(); same != tl.SimReport() {
		t.Errorf("a report with a timeline is not returned as it is")
	}
	if got, want := r.Title(), "tiny on A100-80GB: "+r.Plan().Summary(); got != want {
		t.Errorf("Title = %q, want %q", got, want)
	}
}
