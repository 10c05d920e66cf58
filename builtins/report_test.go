package builtins

import (
	"errors"
	"strings"
	"testing"

	"github.com/fatih/color"
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/builtins/plans"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The tiny model has 1000*64 + 2*64*256 + 64*1000 = 160,768 parameters:
// in fp32 with AdamW, 643,072 B of weights, as many of gradients, twice as
// many of moments. Its largest allocation is the cuBLAS workspace on an
// A100 (4096 KiB * 2 + 16 KiB * 8 = 8,519,680 B), larger than any tensor.
const reportPrelude = `
m = model("tiny", embedding(1000, 64), mlp(64, 256), vocab = 1000)
p = train(m, seq = 8, gpu = "A100-80GB")
r = simulate(p)
small = simulate(p.replace(gpu = gpu(name = "small", memory = 2 * MiB, context = 0)))
`

func TestReport(t *testing.T) {
	runPreludeCases(t, reportPrelude, []evalCase{
		{expr: "type(r)", want: `"report"`},
		{expr: "r.params", want: "160768"},
		{expr: "r.trainable_params", want: "160768"},
		{expr: "r.states", want: `{"params": 643072, "grads": 643072, "master": 0, "optimizer": 1286144, "buffers": 0}`},
		{expr: "r.capacity", want: "85100068864"}, // PyTorch's total for an A100-SXM4-80GB (sim/hw TestCatalogCapacities)
		{expr: "r.smi_total // MiB", want: "81920"},
		{expr: "r.capacity == gpu(\"A100-80GB\").memory", want: "True"},
		{expr: "r.headroom == r.capacity - r.device_used", want: "True"},
		{expr: "r.fits", want: "True"},
		{expr: "r.oom", want: "None"},
		{expr: "r.peak_allocated <= r.peak_reserved", want: "True"},
		{expr: "r.device_used == r.peak_reserved + gpu(\"A100-80GB\").context", want: "True"},
		{expr: "list(r.breakdown.keys())", want: `["params", "grads", "optimizer", "activations", "temporaries", "comm", "fragmentation", "cuda_context", "paged_optimizer", "reserved_later"]`},
		{expr: "r.breakdown[\"cuda_context\"] == gpu(\"A100-80GB\").context", want: "True"},
		{expr: "r.largest.bytes", want: "8519680"},
		{expr: "r.largest.tensor", want: `"cuBLAS workspace"`},
		{expr: "r.largest.phase", want: `"setup"`},
		{expr: "r.largest.dtype", want: "int8"},
		{expr: "r.largest.shape", want: "[]"},
		{expr: "r.peak_at.phase in [\"setup\", \"forward\", \"recompute\", \"backward\", \"optimizer\"]", want: "True"},
		{expr: "r.traffic.keys()", want: `["hbm", "pcie", "nvme", "network"]`},
		{expr: "r.host_memory", want: "0"},
		{expr: "r.saved_activations > 0", want: "True"},
		{expr: "r.step_time > 0", want: "True"},
		{expr: "0 < r.mfu and r.mfu <= r.hfu and r.hfu < 1", want: "True"},
		{expr: "r.tokens_per_s == 8 / r.step_time", want: "True"},
		{expr: "r.comm_bytes", want: "0"},
		{expr: "r.ranks", want: "[]"},
		{expr: "r.notes", want: "[]"},
		{expr: "r.plan.seq", want: "8"},
		{expr: "[o.name for o in r.overheads]", want: `["cuda_context"]`},
		{expr: "r.summary.startswith(\"fits: \")", want: "True"},
		{expr: "r.timeline", err: "report has no timeline: use simulate(plan, timeline=True)"},
		{expr: "len(simulate(p, timeline = True).timeline) > 10", want: "True"},
		{expr: "sorted(simulate(p, timeline = True).timeline[0].keys())",
			want: `["activations", "allocated", "comm", "grads", "op", "optimizer", "params", "phase", "reserved", "temporaries"]`},
		{expr: "max([e[\"allocated\"] for e in simulate(p, timeline = True).timeline]) == r.peak_allocated", want: "True"},
		{expr: "small.fits", want: "False"},
		{expr: "small.oom.message.startswith(\"CUDA out of memory. Tried to allocate \")", want: "True"},
		{expr: "small.oom.bytes > 0", want: "True"},
		{expr: "small.summary.startswith(\"does not fit: needs \")", want: "True"},
		{expr: "small.headroom < 0", want: "True"},
		{expr: "simulate(3)", err: "plan must be a plan from train() (got int)"},
		{expr: "simulate(p, timeline = 1)", err: `for parameter "timeline": got int, want bool`},
	})
}

// TestSimulateErrorOrigin checks that an engine error from simulate()
// carries the plan's declaration. The plan is built in Go around a model
// whose widths do not chain (model() would have refused it).
func TestSimulateErrorOrigin(t *testing.T) {
	file := "plan.star"
	decl := syntax.MakePosition(&file, 7, 5)
	m := &core.Model{Name: "bad", Layers: []core.Layer{&nn.Embedding{Rows: 10, Dim: 8}, &nn.Linear{In: 16, Out: 8}}, Loss: "none"}
	a := plans.DefaultTrainArgs()
	a.Set("model", models.NewModel(m, nil, decl))
	a.Set("seq", starlark.MakeInt(4))
	pv, err := plans.NewPlan(a, decl)
	if err != nil {
		t.Fatal(err)
	}
	thread := &starlark.Thread{}
	(&host.State{}).Attach(thread)
	_, err = starlark.Call(thread, starlark.NewBuiltin("simulate", reports.SimulateFn), starlark.Tuple{pv}, nil)
	var se *units.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *sim.Error", err)
	}
	if se.Origin != "plan.star:7:5" || !strings.Contains(se.Msg, "linear expects inputs with 16 features") {
		t.Errorf("got origin %q, message %q", se.Origin, se.Msg)
	}
}

// TestReportColor checks that print(r) is coloured only when the run's
// State says so.
func TestReportColor(t *testing.T) {
	for _, on := range []bool{false, true} {
		thread := &starlark.Thread{}
		(&host.State{Color: on}).Attach(thread)
		g, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "r.star", reportPrelude, Predeclared())
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"r", "small"} {
			s := g[name].String()
			if got := strings.Contains(s, "\x1b["); got != on {
				t.Errorf("color=%v: %s has escape codes: %v\n%s", on, name, got, s)
			}
			style := map[string][]color.Attribute{"r": host.StyleGreen, "small": host.StyleRed}[name]
			want := host.Paint(true, style, "x")
			want = want[:strings.Index(want, "x")] // the verdict colour's escape code
			if on && !strings.Contains(s, want) {
				t.Errorf("%s: missing verdict colour %q", name, want)
			}
		}
	}
}

// TestBar checks the breakdown bars: eighths of a character, a sliver for
// anything above zero.
func TestBar(t *testing.T) {
	for _, tc := range []struct {
		n, scale int64
		want     string
	}{
		{0, 100, ""},
		{1, 1 << 40, "▏"},
		{100, 100, strings.Repeat("█", reports.BarWidth)},
		{50, 100, strings.Repeat("█", reports.BarWidth/2)},
		{1, 8 * reports.BarWidth, "▏"},
		{3, 8 * reports.BarWidth, "▍"},
		{9, 8 * reports.BarWidth, "█▏"},
	} {
		if got := reports.Bar(tc.n, tc.scale); got != tc.want {
			t.Errorf("bar(%d, %d) = %q, want %q", tc.n, tc.scale, got, tc.want)
		}
	}
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {6738415616, "6,738,415,616"}, {-1234567, "-1,234,567"}} {
		if got := host.Thousands(tc.n); got != tc.want {
			t.Errorf("thousands(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestReportNoTimeModel checks that a gpu without speed figures gives None
// time figures, not +Inf or NaN.
func TestReportNoTimeModel(t *testing.T) {
	runPreludeCases(t, reportPrelude, []evalCase{
		{expr: "small.step_time", want: "None"},
		{expr: "small.mfu", want: "None"},
		{expr: "small.tokens_per_s", want: "None"},
		{expr: "small.comm_bytes", want: "None"},
		{expr: `"time            unknown: small has no bf16_tflops" in str(small)`, want: "True"},
		{expr: `"Inf" in str(small) or "NaN" in str(small)`, want: "False"},
	})
}
