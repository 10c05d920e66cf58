package lang

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
)

// TestStdlibZooNamesAsHFConfig holds the names of the zoo's gpt2() and
// bert() parameters to hf_config's, which are transformers' own
// (sim/hf_names_test.go), less the head class's attribute for its base
// model ("transformer.", "bert."), which the zoo leaves out as its
// decoders leave out "model.".
func TestStdlibZooNamesAsHFConfig(t *testing.T) {
	pairs := []struct{ zoo, hf, arch, base string }{
		{`gpt2("124m")`, "gpt2.json", "None", "transformer."},
		{`bert("base")`, "bert-base-uncased.json", "None", "bert."},
		{`bert("base", head = "none")`, "bert-base-uncased.json", `"BertModel"`, ""},
		{`bert("base", head = "classification")`, "bert-base-uncased.json", `"BertForSequenceClassification"`, "bert."},
	}
	files := tree()
	src := `load("@stdlib//llm.star", "bert", "gpt2")` + "\n"
	for i, p := range pairs {
		data, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", p.hf))
		if err != nil {
			t.Fatal(err)
		}
		files["hf/"+p.hf] = tree("x", string(data))["x"]
		src += "zoo" + string(rune('0'+i)) + " = " + p.zoo + "\n"
		src += "hf" + string(rune('0'+i)) + ` = hf_config("hf/` + p.hf + `", arch = ` + p.arch + ")\n"
	}
	files["main.star"] = tree("x", src)["x"]
	in := New(Options{Files: files})
	defer in.Close()
	g, err := in.RunFile(context.Background(), "main.star")
	if err != nil {
		t.Fatal(err)
	}
	names := func(v any, base string) []string {
		m := v.(*models.Model).Sim()
		prec, _ := core.LookupPrecision("bf16")
		prog, err := (&core.Plan{Model: m, Batch: 1, Seq: 128, GradAccum: 1, Members: 1, Precision: prec,
			Optimizer: core.Optimizer{Kind: core.AdamW}}).LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range prog.Params {
			out = append(out, strings.TrimPrefix(p.Name, base))
		}
		slices.Sort(out)
		return out
	}
	for i, p := range pairs {
		k := string(rune('0' + i))
		zoo, hf := names(g["zoo"+k], ""), names(g["hf"+k], p.base)
		if !slices.Equal(zoo, hf) {
			for _, n := range zoo {
				if !slices.Contains(hf, n) {
					t.Errorf("%s: %s is not among hf_config's names", p.zoo, n)
				}
			}
			for _, n := range hf {
				if !slices.Contains(zoo, n) {
					t.Errorf("%s: hf_config's %s is missing", p.zoo, n)
				}
			}
		}
	}
}
