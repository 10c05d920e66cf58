package builtins

import "testing"

// reprPrelude sweeps values that are not strings, numbers or bools: gpu()
// and optimizer values. small is a card too small for the tiny model's
// step (its CUDA context takes 500 MiB of its 520).
const reprPrelude = sweepPrelude + `
g = sweep(p, gpu = [gpu("A100-80GB"), gpu("H100")], optimizer = [adamw(fused = True), adamw8bit()])
small = gpu(name = "small", memory = 520 * MiB, bf16_tflops = 100, hbm_gbps = 1000)
tight = sweep(p, gpu = [small], batch = [1, 4])
mixed = sweep(p, gpu = [small, "A100-80GB"])
mine = tabulate([{"model": "7b", "peak": 3 * GiB, "diff": 1.25}, {"model": "13b", "diff": -0.5, "note": "a,b"}],
                units = {"peak": "bytes"}, formats = {"diff": "+.1f"}, title = "mine")
lists = tabulate([("a", 1), ("b", 22)], columns = ["name", "n"])
`

// r.modules is a list of structs, which tabulate reads as docs/time.md
// says: every field by name, or the fields columns picks.
func TestTabulateStructs(t *testing.T) {
	runPreludeCases(t, sweepPrelude+"mods = simulate(p).modules\n", []evalCase{
		{expr: "tabulate(mods).columns", want: `["backward", "bound", "bytes", "count", "flops", "forward", "launch", "name", "recompute", "seconds"]`},
		{expr: "len(tabulate(mods)) == len(mods)", want: "True"},
		{expr: "tabulate(mods, columns = [\"name\", \"seconds\"])[0][\"name\"] == mods[0].name", want: "True"},
		{expr: "tabulate(mods, columns = [\"name\", \"seconds\"], units = {\"seconds\": \"seconds\"}).render().splitlines()[0].split()", want: `["name", "seconds"]`},
		{expr: "tabulate(mods, columns = [\"name\", \"secs\"])", err: `tabulate: no row has a field "secs"`},
		{expr: "tabulate([mods[0], {\"a\": 1}])", err: "rows must be all dicts, all structs or all lists (row 0 is a struct, row 1 a dict)"},
	})
}

// Every swept axis is a column, shown by its repr; t.rows keep the values.
func TestSweepAxesByRepr(t *testing.T) {
	runPreludeCases(t, reprPrelude, []evalCase{
		{expr: "g.render().splitlines()[1].split()[:3]", want: `["gpu", "optimizer", "fits"]`},
		{expr: "[l.split(\"  \")[0] for l in g.render().splitlines()[2:]]",
			want: `["gpu(\"A100-80GB\")", "gpu(\"A100-80GB\")", "gpu(\"H100-80GB\")", "gpu(\"H100-80GB\")"]`},
		{expr: "g.render().splitlines()[3].split()[1]", want: `"adamw8bit()"`},
		{expr: "type(g[0][\"gpu\"])", want: `"gpu"`},
		{expr: "g.as_dicts()[1][\"optimizer\"]", want: `"adamw8bit()"`},
		{expr: "g.as_dicts()[0][\"optimizer\"]", want: `"adamw(impl=\"fused\")"`},
		{expr: "g.csv().splitlines()[0]", want: `"gpu,optimizer,fits,device_used,headroom,peak_allocated,step_time,mfu,tokens_per_s"`},
		{expr: "g.csv().splitlines()[1].split(\",\")[:3]", want: `["\"gpu(\"\"A100-80GB\"\")\"", "\"adamw(impl=\"\"fused\"\")\"", "true"]`},
	})
}

// best() ranks the rows that fit unless fits=False; when none fits it
// says so and names the nearest.
func TestBestFits(t *testing.T) {
	runPreludeCases(t, reprPrelude, []evalCase{
		{expr: "mixed.best()[\"gpu\"]", want: `"A100-80GB"`},
		{expr: "mixed.best(by = \"headroom\", maximize = False)[\"fits\"]", want: "True"},
		{expr: "mixed.best(by = \"headroom\", maximize = False, fits = False)[\"gpu\"].name", want: `"small"`},
		{expr: "mixed.render().splitlines()[3].split()[0]", want: `"A100-80GB"`},
		{expr: "tight.best()", err: "best: none of the 2 rows fits; the nearest (batch=1) is "},
		{expr: "tight.best(fits = False)[\"batch\"]", want: "1"},
		{expr: "tight.filter(lambda r: r[\"fits\"]).best()", want: "None"},
		{expr: "t.best(where = {\"tp\": 5})", want: "None"},
	})
}

func TestTabulate(t *testing.T) {
	runPreludeCases(t, reprPrelude, []evalCase{
		{expr: "mine.render()", want: `"mine\nmodel      peak  diff  note\n7b     3.00 GiB  +1.2  -\n13b           -  -0.5  a,b\n"`},
		{expr: "mine.columns", want: `["model", "peak", "diff", "note"]`},
		{expr: "mine.csv()", want: `"model,peak,diff,note\n7b,3221225472,1.25,\n13b,,-0.5,\"a,b\"\n"`},
		{expr: "mine.sort(\"diff\")[0][\"model\"]", want: `"13b"`},
		{expr: "mine.best(by = \"diff\", maximize = True)[\"model\"]", want: `"7b"`},
		{expr: "mine.best(by = \"peak\")[\"model\"]", want: `"7b"`},                                       // 13b's cell is None
		{expr: "mine.best(by = \"model\")", err: `best: column "model" holds string values, not numbers`}, // was None
		{expr: "tabulate([], columns = [\"a\"]).best(by = \"a\")", want: "None"},
		{expr: "lists.render()", want: `"name   n\na      1\nb     22\n"`},
		{expr: "tabulate([], columns = [\"a\"]).render()", want: `"a\n(no rows)\n"`},
		{expr: "tabulate([{\"x\": simulate(p)}]).render().splitlines()[1]", want: `"tiny on A100-80GB: batch 1 x seq 64, bf16-mixed, adamw(), no checkpointing"`},
		{expr: "tabulate([(1, 2)])", err: "rows of lists need columns=[...]"},
		{expr: "tabulate([(1, 2)], columns = [\"a\"])", err: "row 0 has 2 cells for 1 columns"},
		{expr: "tabulate([{\"a\": 1}, (1,)])", err: "rows must be all dicts, all structs or all lists (row 0 is a dict, row 1 a tuple)"},
		{expr: "tabulate([1])", err: "row 0 must be a dict, struct, list or tuple (got int)"},
		{expr: "tabulate([{\"mdoel\": 1}], columns = [\"model\"])", err: `row 0 has key "mdoel", which columns does not list`},
		{expr: "tabulate([{\"a\": \"x\"}], formats = {\"a\": \".2f\"})", err: `formats["a"] on row 0: format: type 'f'`},
		{expr: "tabulate([{\"a\": 1}], units = {\"a\": \"GiB\"})", err: `units["a"] is "GiB"; a unit is "bytes", "seconds" or "fraction"`},
		{expr: "tabulate([{\"a\": 1}], formats = {\"b\": \"5\"})", err: `table has no column "b"`},
		{expr: "tabulate(\"ab\")", err: "rows must be a list of dicts, structs or lists (got string)"},
		{expr: "tabulate([(1,)], columns = [\"a\", \"a\"])", err: `columns names "a" twice`},
		{expr: "format(3.14159, \".2f\") + \"|\" + format(\"gpu\", \"<6\") + \"|\" + format(1234567, \",\")", want: `"3.14|gpu   |1,234,567"`},
		{expr: "format(\"x\", \".2f\")", err: "needs a number (got a string)"},
	})
}
