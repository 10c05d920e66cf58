package builtins

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// A small decoder (4 heads, 4 blocks) on an A100: tp=3 does not divide its
// heads, so the sweep has two rows the plan rejects.
const sweepPrelude = `
blk = sequential(residual(sequential(rmsnorm(64), attention(64, 4))), residual(sequential(rmsnorm(64), mlp(64, 256, act = "swiglu"))))
m = model("tiny", embedding(1000, 64), repeat(blk, 4), rmsnorm(64), vocab = 1000)
p = train(m, seq = 64, gpu = "A100-80GB", precision = "bf16-mixed")
t = sweep(p, tp = [1, 2, 3], checkpoint = ["none", "full"])
ok = t.filter(lambda r: r["error"] == None)
z = sweep(p, dp = [2, 4], zero = [0, 3])
s = search(m, gpus = 8, seq = 64, global_batch = 16, top = 3)
`

func TestSweep(t *testing.T) {
	runPreludeCases(t, sweepPrelude, []evalCase{
		{expr: "type(t)", want: `"table"`},
		{expr: "len(t)", want: "6"},
		{expr: "t.columns", want: `["tp", "checkpoint", "fits", "device_used", "headroom", "peak_allocated", "step_time", "mfu", "tokens_per_s", "error", "plan", "report"]`},
		// Rows in cross-product order, the last axis fastest.
		{expr: "[(r[\"tp\"], r[\"checkpoint\"]) for r in t]", want: `[(1, "none"), (1, "full"), (2, "none"), (2, "full"), (3, "none"), (3, "full")]`},
		{expr: "t[4][\"error\"]", want: `"layers.0-3.attn: tp=3 does not divide 4 attention heads"`},
		{expr: "[t[4][\"fits\"], t[4][\"step_time\"], t[4][\"plan\"]]", want: "[None, None, None]"},
		{expr: "len(ok)", want: "4"},
		{expr: "all([r[\"fits\"] for r in ok])", want: "True"},
		{expr: "t[1][\"plan\"].checkpoint", want: `checkpoint("full")`},
		// A range is an axis of the values it yields, as a list is.
		{expr: "[(r[\"tp\"], r[\"checkpoint\"]) for r in sweep(t[0][\"plan\"], tp = range(1, 3), checkpoint = (\"none\",))]", want: `[(1, "none"), (2, "none")]`},
		{expr: "t[1][\"plan\"].parallel.tp", want: "1"},
		{expr: "t[2][\"plan\"].parallel.tp", want: "2"},
		{expr: "t[3][\"report\"].step_time == t[3][\"step_time\"]", want: "True"},
		// Full checkpointing recomputes the forward: slower.
		{expr: "t[1][\"step_time\"] > t[0][\"step_time\"] and t[1][\"report\"].hfu > t[1][\"mfu\"]", want: "True"},
		// best: lowest step time by default; mfu, tokens_per_s and headroom are maximized.
		{expr: "t.best()[\"step_time\"] == min([r[\"step_time\"] for r in ok])", want: "True"},
		{expr: "t.best(by = \"mfu\")[\"mfu\"] == max([r[\"mfu\"] for r in ok])", want: "True"},
		{expr: "t.best(by = \"mfu\", maximize = False)[\"mfu\"] == min([r[\"mfu\"] for r in ok])", want: "True"},
		{expr: "t.best(where = {\"tp\": 2, \"checkpoint\": \"full\"})[\"plan\"].parallel.tp", want: "2"},
		{expr: "t.best(where = lambda r: r[\"checkpoint\"] == \"full\")[\"checkpoint\"]", want: `"full"`},
		{expr: "t.best(where = {\"tp\": 5})", want: "None"},
		{expr: "t.best(by = \"step_tme\")", err: `table has no column "step_tme"`},
		{expr: "t.best(where = 3)", err: "where must be a function of a row or a dict of column values (got int)"},
		// sort: None last, either way.
		{expr: "[r[\"step_time\"] for r in t.sort(\"step_time\")][:4] == sorted([r[\"step_time\"] for r in ok])", want: "True"},
		{expr: "[r[\"step_time\"] for r in t.sort(\"step_time\", reverse = True)][4:]", want: "[None, None]"},
		{expr: "t.sort(\"tp\", reverse = True)[0][\"tp\"]", want: "3"},
		// pareto: no row beats another in both memory and time.
		{expr: "len(ok.pareto(\"device_used\", \"step_time\")) >= 1", want: "True"},
		{expr: "[r for r in ok if any([o[\"device_used\"] < r[\"device_used\"] and o[\"step_time\"] < r[\"step_time\"] for o in ok])] == [] or len(ok.pareto(\"device_used\", \"step_time\")) < len(ok)", want: "True"},
		{expr: "all([not any([o[\"device_used\"] <= r[\"device_used\"] and o[\"step_time\"] < r[\"step_time\"] for o in ok]) for r in ok.pareto(\"device_used\", \"step_time\")])", want: "True"},
		// as_dicts: plain data for json.encode (no plan or report).
		{expr: "sorted(t.as_dicts()[0].keys())", want: `["checkpoint", "device_used", "error", "fits", "headroom", "mfu", "peak_allocated", "step_time", "tokens_per_s", "tp"]`},
		{expr: "json.encode(t.as_dicts()[4])", want: `"{\"checkpoint\":\"none\",\"device_used\":null,\"error\":\"layers.0-3.attn: tp=3 does not divide 4 attention heads\",\"fits\":null,\"headroom\":null,\"mfu\":null,\"peak_allocated\":null,\"step_time\":null,\"tokens_per_s\":null,\"tp\":3}"`},
		{expr: "t.render().splitlines()[1].split()", want: `["tp", "checkpoint", "fits", "device_used", "headroom", "peak_allocated", "step_time", "mfu", "tokens_per_s", "error"]`},
		{expr: "t.title", want: `"sweep of tp (3) x checkpoint (2): 6 plans"`},
		// parallel() fields and the data-parallel sharding.
		{expr: "[(r[\"dp\"], r[\"zero\"], r[\"plan\"].parallel.dp) for r in z]", want: "[(2, 0, 2), (2, 3, 2), (4, 0, 4), (4, 3, 4)]"},
		{expr: "z[3][\"report\"].states[\"optimizer\"] * 4 == z[2][\"report\"].states[\"optimizer\"]", want: "True"},
		// search: the fastest fitting layouts of 8 GPUs.
		{expr: "type(s)", want: `"table"`},
		// The three fastest that fit (HSDP over 4 and 2 replicas, FSDP over
		// all 8 GPUs) and the Pareto front of step time and memory: two
		// front layouts are not among the three (FSDP with per-op and with
		// full checkpointing: a few MiB smaller and slower). ZeRO-3 is not
		// among them since its step's norm copies and flattened gradients
		// are timed (session 48: two launches a gradient tensor for the norm,
		// at the launch floor on this tiny model).
		{expr: "len(s)", want: "5"},
		{expr: "len([r for r in s if r[\"front\"]]) >= 2", want: "True"},
		{expr: "all([not any([o[\"step_time\"] <= r[\"step_time\"] and o[\"device_used\"] < r[\"device_used\"] for o in s]) for r in s if r[\"front\"]])", want: "True"},
		{expr: "[r[\"device_used\"] for r in s if r[\"front\"]] == sorted([r[\"device_used\"] for r in s if r[\"front\"]], reverse = True)", want: "True"},
		{expr: "all([r[\"report\"].fits for r in s])", want: "True"},
		{expr: "[r[\"step_time\"] for r in s] == sorted([r[\"step_time\"] for r in s])", want: "True"},
		{expr: "all([r[\"tp\"] * r[\"pp\"] * r[\"cp\"] * r[\"dp\"] == 8 and r[\"dp\"] * r[\"micro_batch\"] * r[\"micro_batches\"] == 16 for r in s])", want: "True"},
		{expr: "simulate(s[0][\"plan\"]).step_time == s[0][\"step_time\"]", want: "True"},
		{expr: "s.notes[0].startswith(\"explored \") and \"replayed in full\" in s.notes[0]", want: "True"},
		{expr: "[n for n in s.notes if n.startswith(\"the Pareto front\")] != []", want: "True"},
	})
}

func TestSweepErrors(t *testing.T) {
	runPreludeCases(t, sweepPrelude, []evalCase{
		{expr: "sweep(p, tpp = [1, 2])", err: `sweep: unknown axis "tpp"`},
		{expr: "sweep(3, tp = [1])", err: "sweep: the first argument must be a plan from train() (got int)"},
		{expr: "sweep(p, tp = [])", err: "sweep: axis tp has no values"},
		{expr: "sweep(p, batch = list(range(1, 20)), seq = list(range(1, 20)), max = 100)", err: "sweep: batch (19) x seq (19) make more than 100 plans"},
		{expr: "sweep(p, batch = [\"x\"])", err: "sweep: batch=\"x\": batch must be an int (got string)"},
		{expr: "search(m, seq = 64, global_batch = 16)", err: "search needs gpus= (or nodes=)"},
		{expr: "search(m, gpus = 8, seq = 64)", err: "search needs global_batch="},
		{expr: "search(m, gpus = 8, seq = 64, global_batch = 16, sharding = [\"zero4\"])", err: `unknown sharding "zero4"`},
		{expr: "search(m, gpus = 12, seq = 64, global_batch = 16)", err: "gpus=12 is not a whole number of 8-GPU nodes"},
		{expr: "search(m, gpus = 8, nodes = 2, seq = 64, global_batch = 16)", err: "gpus=8 but nodes=2 x gpus_per_node=8 is 16"},
		{expr: "search(m, gpus = 33554432, seq = 64, global_batch = 16)", err: "search: gpus=33554432 is more GPUs than memsh simulates (16777216)"},
		{expr: "search(m, nodes = 4194304, seq = 64, global_batch = 16)", err: "search: gpus=33554432 is more GPUs than memsh simulates (16777216)"},
		{expr: "search(m, gpus = 8, seq = 64, global_batch = 16, top = 0)", err: "top must be at least 1"},
		{expr: "search(m, gpus = 8, seq = 64, global_batch = 16, tp = [0])", err: "tp values must be at least 1 (got 0)"},
		{expr: "search(m, gpus = 8, seq = 64, global_batch = 16, max_layouts = 0)", err: "max_layouts must be at least 1 (got 0)"},
		{expr: "search(m, gpus = 8, seq = 64, global_batch = 16, max_layouts = 10)", err: "the search space has more than 10 layouts"},
		// tp=3 splits 8 GPUs no way: no layout in the space, and why.
		{expr: "search(m, gpus = 8, seq = 64, global_batch = 16, top = None, tp = [3]).notes[-1]", want: `"no layout in the space (the combinations above): widen tp=, pp=, cp= or micro_batch= (None tries every one), or give a global_batch that a data-parallel degree divides"`},
		{expr: "search(m, gpus = 8, seq = 64, global_batch = 16, top = None, tp = [3]).notes[-2]", want: `"  skipped 12 combinations of degrees: tp x cp x pp = 3, 6, 12, 24, 48 or 96 does not divide the 8 GPUs"`},
	})
}

// Ctrl-C cancels the run's context: a sweep, a search, advice, a simulate() or a limit
// stops and says so.
func TestSweepInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, src := range []string{
		"sweep(p, tp = [1, 2])",
		"search(m, gpus = 8, seq = 64, global_batch = 16)",
		"advise(p.replace(gpu = gpu(\"A100-80GB\", memory = 600 * MiB)))",
		"max_batch(p)",
		"max_seq(p)",
		"simulate(p)",
	} {
		thread := &starlark.Thread{}
		(&host.State{Context: ctx}).Attach(thread)
		_, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true}, thread, "x.star", sweepModel+src, Predeclared())
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Errorf("%s: got %v, want an interrupted error", src, err)
		}
	}
	// A limit of the command (--timeout, --max-memory) cancels it with a
	// cause, which the error gives.
	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(errors.New("memory use passed the limit (use --max-memory to raise)"))
	thread := &starlark.Thread{}
	(&host.State{Context: ctx}).Attach(thread)
	_, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true}, thread, "x.star", sweepModel+"simulate(p)", Predeclared())
	if err == nil || !strings.Contains(err.Error(), "simulate stopped: memory use passed the limit (use --max-memory to raise)") {
		t.Errorf("got %v, want simulate stopped with the cause", err)
	}
}

const sweepModel = `
blk = sequential(residual(sequential(rmsnorm(64), attention(64, 4))), residual(sequential(rmsnorm(64), mlp(64, 256, act = "swiglu"))))
m = model("tiny", embedding(1000, 64), repeat(blk, 4), rmsnorm(64), vocab = 1000)
p = train(m, seq = 64, gpu = "A100-80GB", precision = "bf16-mixed")
`
