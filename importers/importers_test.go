package importers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/lang"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// importCase is one real config imported with the command line's options:
// the keys it must list as not understood and not modelled, and the
// hand-written plan of the same job, which the imported plan must equal.
type importCase struct {
	name        string
	file        string // under testdata
	opts        Options
	unknown     []string
	notModelled []string
	hand        string            // the plan written by hand: a script defining plan
	files       map[string]string // more files the scripts read, by name: testdata path
	// step is what one optimizer step of the whole job processes, from
	// the config's keys by its framework's definition of the global batch
	// (step_test.go), which the imported plan's replay must report.
	step step
}

// defaults fills the options memsh check's flags default to.
func defaults(o Options) Options {
	if o.GPU == "" {
		o.GPU = "H100-80GB"
	}
	if o.GPUs == 0 {
		o.GPUs = 1
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	return o
}

// runImportCases imports each case, checks its lists, and replays its
// plan and the hand-written one: the same train() call (str(plan)), the
// same model, the same device memory and peak.
func runImportCases(t *testing.T, cases []importCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			o := defaults(tc.opts)
			if p, ok := tc.files[o.Model]; ok && o.ModelData == nil { // memsh check reads --model
				if o.ModelData, err = os.ReadFile(filepath.Join("testdata", p)); err != nil {
					t.Fatal(err)
				}
			}
			res, err := Import(tc.file, data, o)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.unknown, res.Unknown); diff != "" {
				t.Errorf("not understood (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.notModelled, res.NotModelled); diff != "" {
				t.Errorf("not modelled (-want +got):\n%s", diff)
			}
			for _, k := range res.Unknown {
				if !strings.Contains(res.Script, "#   "+k+"\n") {
					t.Errorf("the script's header does not list %s", k)
				}
			}
			got, replayed := replayPlan(t, "imported.star", res.Script, tc.files)
			want, _ := replayPlan(t, "hand.star", tc.hand, tc.files)
			if got != want {
				t.Errorf("imported plan\n  %s\nwant the hand-written\n  %s\nscript:\n%s", got, want, res.Script)
			}
			tc.step.check(t, replayed)
		})
	}
}

// replayPlan runs a script and describes its plan by the train() call,
// the model's parameters and the replayed step's device memory and peak;
// it returns too what the replayed step processes (replayedStep).
func replayPlan(t *testing.T, name, src string, more map[string]string) (string, replayedStep) {
	t.Helper()
	src += "\n_r = simulate(plan)\n_d = \"%s; params %d; device_used %d, peak_allocated %d\" % (str(plan), plan.model.params, _r.device_used, _r.peak_allocated)\n" + replayedStepScript
	globals := runScript(t, name, src, more)
	return globals["_d"].(starlark.String).GoString(), replayedStepOf(t, globals)
}

// runScript runs a script (and the testdata files it reads, by name) and
// returns its globals.
func runScript(t *testing.T, name, src string, more map[string]string) starlark.StringDict {
	t.Helper()
	files := fstest.MapFS{name: {Data: []byte(src)}}
	for n, p := range more {
		data, err := os.ReadFile(filepath.Join("testdata", p))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = &fstest.MapFile{Data: data}
	}
	var out strings.Builder
	in := lang.New(lang.Options{Stdout: &out, Files: files})
	defer in.Close()
	globals, err := in.RunFile(context.Background(), name)
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, src)
	}
	return globals
}

// errorCase is a config that cannot become a plan: the error must name
// the key (and the line when the file has one) and never panic.
type errorCase struct {
	name      string
	file      string // "name.ext": the extension picks the format
	config    string
	opts      Options
	want      string // the error's text
	wantHint  string // a part of its hint
	overrides []string
}

func runErrorCases(t *testing.T, cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults(tc.opts)
			o.Overrides = tc.overrides
			_, err := Import(tc.file, []byte(tc.config), o)
			var ie *Error
			if !errors.As(err, &ie) {
				t.Fatalf("want an *Error, got %v", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n  %s\nwant\n  %s", err, tc.want)
			}
			if !strings.Contains(ie.Hint, tc.wantHint) {
				t.Errorf("hint %q does not say %q", ie.Hint, tc.wantHint)
			}
		})
	}
}

// checkScript is what every imported script must be: valid Starlark
// whose only top-level statements are the loads, assignments of names (the
// plan and the parts a graph model is built from) and main().
func checkScript(t *testing.T, script string) {
	t.Helper()
	f, err := (&syntax.FileOptions{}).Parse("imported.star", script, 0)
	if err != nil {
		t.Fatalf("the script does not parse: %v\n%s", err, script)
	}
	for _, st := range f.Stmts {
		switch s := st.(type) {
		case *syntax.LoadStmt, *syntax.DefStmt:
		case *syntax.AssignStmt:
			if _, ok := s.LHS.(*syntax.Ident); !ok || s.Op != syntax.EQ {
				t.Fatalf("the script assigns something besides a name: %s", script)
			}
		default:
			t.Fatalf("unexpected top-level statement %T in\n%s", st, script)
		}
	}
}

func TestOverrides(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "torchtune", "llama3_1_8B_lora_single_device.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o := defaults(Options{Overrides: []string{"batch_size=8", "tokenizer.max_seq_len=1024", "model.lora_rank=16", "+enable_activation_checkpointing=true"}})
	res, err := Import("lora.yaml", data, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"batch = 8,", "seq = 1024,", "lora(rank = 16,", `checkpoint = "full",`} {
		if !strings.Contains(res.Script, want) {
			t.Errorf("the overrides did not reach the plan: no %q in\n%s", want, res.Script)
		}
	}
}

func TestCommentsCannotBreakOut(t *testing.T) {
	config := "model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\nbatch_size: 1\n\"evil\\nplan = 1\": 2\n"
	res, err := Import("x.yaml", []byte(config), defaults(Options{Seq: 128}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"evil\nplan = 1"}, res.Unknown); diff != "" {
		t.Fatal(diff)
	}
	checkScript(t, res.Script)
	if !strings.Contains(res.Script, `#   "evil\nplan = 1"`) {
		t.Errorf("the key is not quoted in the header:\n%s", res.Script)
	}
}

// FuzzImport feeds every importer arbitrary bytes: it returns a plan
// script that parses, or an *Error; it never panics.
func FuzzImport(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*", "*"))
	more, _ := filepath.Glob(filepath.Join("testdata", "torchtitan", "*", "*", "*.py"))
	paths = append(paths, more...)
	more, _ = filepath.Glob(filepath.Join("testdata", "torchtitan", "*", "*.py"))
	paths = append(paths, more...)
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(filepath.Base(p), data)
		}
	}
	f.Add("x.yaml", []byte("model: {_component_: torchtune.models.llama3_1.lora_llama3_1_8b, lora_rank: 8}\nbatch_size: 1\n"))
	f.Add("x.yaml", []byte("a: &a [*a]\n"))
	f.Add("ax.yml", []byte("base_model: acme/m\nmicro_batch_size: 1\ngradient_accumulation_steps: 1\nbf16: true\nadapter: lora\nlora_r: 8\nlora_alpha: 16\n"+
		"lora_target_modules: 'model.layers.[\\d]+.self_attn.q_proj'\nlora_target_parameters: [mlp.experts.gate_up_proj]\n"+
		"plugins: [axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin]\ngradient_checkpointing: true\nactivation_offloading: legacy\n"+
		"fsdp_version: 2\nfsdp_config: {activation_checkpointing: false}\n"))
	f.Add("dpo.yml", []byte("base_model: acme/m\nmicro_batch_size: 2\ngradient_accumulation_steps: 1\nbf16: true\nrl: dpo\nrl_adapter_ref_model: true\n"+
		"precompute_ref_log_probs: false\nunfrozen_parameters: ['model.layers.1[0-5].*', 'lm_head[:100]']\nattn_implementation: flash_attention_2\n"+
		"plugins: [axolotl.integrations.swanlab.SwanLabPlugin]\nuse_swanlab: true\n"))
	// The model a config names is found (a tiny Llama's config.json) or not,
	// by the name's length, as memsh check's lookup would say.
	find := func(name string) (FoundModel, error) {
		if len(name)%2 == 0 {
			return FoundModel{Looked: "memsh looked in the Hugging Face cache, /c: not there"}, nil
		}
		return FoundModel{Path: "c/config.json", From: "the model folder c", Data: []byte(`{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, ` +
			`"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "dtype": "bfloat16"}`)}, nil
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		res, err := Import(name, data, defaults(Options{Seq: 64, Top: 3, Function: "llama3_8b", FindModel: find}))
		if err != nil {
			var ie *Error
			if !errors.As(err, &ie) {
				t.Fatalf("not an *Error: %v", err)
			}
			return
		}
		checkScript(t, res.Script)
	})
}
