package lang

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/stdlib"
	"go.starlark.net/starlark"
)

// TestZooHybridTrunkNames: the zoo's mamba2() and nemotron_h() name their
// parameters with no trunk, as every zoo model does, and hf_config names
// the same tensors under the trunk transformers holds them in
// (Mamba2ForCausalLM.backbone in every release; NemotronHForCausalLM.model
// from 5.3, the first release with models/nemotron_h, the hub's remote
// code's backbone before: transformers 5.25.0's modeling_nemotron_h.py,
// base_model_prefix "model", l. 1093 and 1259). Each docstring names a
// row of each kind (its "rows name no trunk (...)" and "hf_config's rows
// print (...)" lists, N a layer index): every name it gives is a
// parameter's module path of the model it says.
func TestZooHybridTrunkNames(t *testing.T) {
	g := runWithHFConfigs(t, `load("@stdlib//llm.star", "mamba2", "nemotron_h")
nemotron = nemotron_h("8b")
hf_nemotron = hf_config("hf/nemotron-h-8b-base-8k.json", transformers = "5.25.0")
hf_nemotron_old = hf_config("hf/nemotron-h-8b-base-8k.json", transformers = "4.53.3")
codestral = mamba2("codestral-7b")
hf_codestral = hf_config("hf/mamba-codestral-7b.json")
`, "nemotron-h-8b-base-8k.json", "mamba-codestral-7b.json")
	exports, err := StdlibExports(stdlib.FS)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, e := range exports {
		docs[e.Name] = e.Doc
	}
	for _, tc := range []struct {
		fn, zoo, hf, trunk string
		docTrunk           bool // the docstring's hf_config example is this release's
	}{
		{"nemotron_h", "nemotron", "hf_nemotron", "model", true},
		{"nemotron_h", "nemotron", "hf_nemotron_old", "backbone", false},
		{"mamba2", "codestral", "hf_codestral", "backbone", true},
	} {
		zoo := moduleNames(t, g[tc.zoo].(*models.Model).Sim())
		hub := moduleNames(t, g[tc.hf].(*models.Model).Sim())
		var want []string
		for _, n := range zoo {
			if strings.HasPrefix(n, tc.trunk+".") {
				t.Errorf("%s: the zoo's %s carries the trunk", tc.zoo, n)
			}
			if !strings.HasPrefix(n, "lm_head") {
				n = tc.trunk + "." + n
			}
			want = append(want, n)
		}
		sort.Strings(want)
		if strings.Join(want, " ") != strings.Join(hub, " ") {
			t.Errorf("%s: hf_config's parameters are not the zoo's under %s.:\n%v\n%v", tc.hf, tc.trunk, hub, want)
		}
		doc := docs[tc.fn]
		rows := regexp.MustCompile(`rows name no trunk\s+\(([^)]*)\)`).FindStringSubmatch(doc)
		hfRows := regexp.MustCompile(`hf_config's rows print\s+\(([^)]*)\)`).FindStringSubmatch(doc)
		if rows == nil || hfRows == nil {
			t.Fatalf("%s's docstring says neither what its rows print nor what hf_config's do", tc.fn)
		}
		check := func(list string, names []string, who string) {
			for _, d := range strings.Split(list, ",") {
				pat := regexp.MustCompile(`^` + strings.ReplaceAll(regexp.QuoteMeta(strings.TrimSpace(d)), "N", "[0-9]+") + `(\.|$)`)
				found := false
				for _, n := range names {
					found = found || pat.MatchString(n)
				}
				if !found {
					t.Errorf("%s's docstring names %q, no module of %s's", tc.fn, strings.TrimSpace(d), who)
				}
			}
		}
		check(rows[1], zoo, tc.zoo)
		if tc.docTrunk {
			check(hfRows[1], hub, tc.hf)
		}
	}
}

// moduleNames lists a model's parameters by name, sorted.
func moduleNames(t *testing.T, m *core.Model) []string {
	t.Helper()
	mixed, _ := core.LookupPrecision("bf16-mixed")
	rt, _ := core.LookupRuntime("cuda")
	p := &core.Plan{Model: m, Batch: 1, Seq: 128, GradAccum: 1, Members: 1, Precision: mixed,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Runtime: rt, Device: hw.Device{Name: "test", Memory: 1 << 50}}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pi := range prog.Params {
		out = append(out, pi.Name)
	}
	sort.Strings(out)
	return out
}

// runWithHFConfigs runs a main.star beside the named config.json files of
// sim/testdata/hf (as hf/NAME) and returns its globals.
func runWithHFConfigs(t *testing.T, script string, configs ...string) starlark.StringDict {
	t.Helper()
	files := tree("main.star", script)
	for _, f := range configs {
		data, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", f))
		if err != nil {
			t.Fatal(err)
		}
		files["hf/"+f] = tree("x", string(data))["x"]
	}
	in := New(Options{Files: files})
	defer in.Close()
	g, err := in.RunFile(context.Background(), "main.star")
	if err != nil {
		t.Fatal(err)
	}
	return g
}
