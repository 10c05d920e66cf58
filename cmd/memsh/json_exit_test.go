package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memsh/memsh/jsondoc"
)

// TestJSONEveryExit holds memsh check --json, fit --json and run --json
// to one JSON document on stdout on every exit, its last line, with the
// exit code the command returns: check's verdict ("kind": "check", its
// error when it exits 2), fit's report or its error ("kind": "error"),
// run's last emitted document or its error. A
// --json user read nothing on stdout when check refused a config or a
// plan, or when a flag was wrong (leftovers_s45).
func TestJSONEveryExit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ds := write("ds.json", `{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}}`)
	dsBig := write("ds_big.json", `{"train_micro_batch_size_per_gpu": 256, "bf16": {"enabled": true}}`)
	gpt2 := write("gpt2.json", `{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "n_positions": 128, "vocab_size": 256}`)
	wide := write("wide.json", `{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 256, "n_head": 4, "n_layer": 2, "n_positions": 1024, "vocab_size": 50000}`)
	broken := write("broken.json", "{")
	emits := write("emits.star", "emit({\"a\": 1})\n")
	fails := write("fails.star", "emit({\"a\": 1})\nfail(\"stop here\")\n")
	refused := write("refused.star", "m = hf_config(\"gpt2.json\")\nemit(1)\nsimulate(train(m, batch = 1, seq = 1024, gpu = \"H100\"))\n")
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		kind    string // of the last document
		message string // in its error ("" for none)
		hint    string // in its error's hint
	}{
		{"check fits", []string{"check", "--json", ds, "--model", gpt2, "--seq", "64", "--top", "0"}, 0, jsondoc.KindCheck, "", ""},
		{"check does not fit", []string{"check", "--json", dsBig, "--model", wide, "--seq", "1024", "--gpu", "RTX-3090", "--top", "0"}, 1, jsondoc.KindCheck, "", ""},
		{"check config error", []string{"check", "--json", ds}, 2, jsondoc.KindCheck, "a DeepSpeed config holds no model", "--model config.json"},
		{"check plan refused", []string{"check", "--json", ds, "--model", gpt2, "--seq", "1024"}, 2, jsondoc.KindCheck, "seq=1024 exceeds the 128 learned positions", "use seq <= 128"},
		{"check missing config", []string{"check", "--json", filepath.Join(dir, "nope.json")}, 2, jsondoc.KindCheck, "no such file", ""},
		{"check unknown gpu", []string{"check", "--json", ds, "--gpu", "XX"}, 2, jsondoc.KindCheck, `unknown gpu "XX"`, ""},
		{"check bad --gpus", []string{"check", "--json", ds, "--gpus", "0"}, 2, jsondoc.KindCheck, "--gpus and --nodes must be positive", ""},
		{"check unknown flag after --json", []string{"check", "--json", ds, "--bogus"}, 2, jsondoc.KindCheck, "unknown flag --bogus", ""},
		{"check unknown flag before --json", []string{"check", "--bogus", "--json", ds}, 2, jsondoc.KindCheck, "unknown flag --bogus", ""},
		{"check --json before the command", []string{"--json", "check", ds}, 2, jsondoc.KindCheck, "a DeepSpeed config holds no model", ""},
		{"check --emit-star with --json", []string{"check", "--json", "--emit-star", ds, "--model", gpt2, "--seq", "64"}, 2, jsondoc.KindCheck, "--emit-star", ""},
		{"fit fits", []string{"fit", "--json", gpt2, "--seq", "64", "--top", "1"}, 0, jsondoc.KindTable, "", ""},
		{"fit malformed config", []string{"fit", "--json", broken, "--seq", "64"}, 1, jsondoc.KindError, "malformed", "cut short"},
		{"fit no --seq", []string{"fit", "--json", gpt2}, 2, jsondoc.KindError, "fit needs --seq N", ""},
		{"fit unknown flag", []string{"fit", "--json", gpt2, "--sequence", "8"}, 2, jsondoc.KindError, "did you mean --seq?", ""},
		{"run emits", []string{"run", "--json", emits}, 0, jsondoc.KindValue, "", ""},
		{"run fails after a value", []string{"run", "--json", fails}, 1, jsondoc.KindError, "stop here", ""},
		{"run refused plan", []string{"run", "--json", refused}, 1, jsondoc.KindError, "exceeds the 128 learned positions", "use seq <= 128"},
		{"run missing script", []string{"run", "--json", filepath.Join(dir, "nope.star")}, 1, jsondoc.KindError, "no such file", ""},
		{"run unknown flag", []string{"run", "--json", "--bogus", emits}, 2, jsondoc.KindError, "unknown flag --bogus", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, &out, &errb, func(string) string { return "" })
			if code != tc.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tc.code, errb.String())
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			var last jsondoc.Doc
			for i, l := range lines {
				var d jsondoc.Doc
				if err := json.Unmarshal([]byte(l), &d); err != nil {
					t.Fatalf("stdout line %d is not a JSON document: %v: %q (stderr %q)", i+1, err, l, errb.String())
				}
				last = d
			}
			if last.Kind != tc.kind {
				t.Fatalf("last document's kind %q, want %q: %s", last.Kind, tc.kind, out.String())
			}
			var e *jsondoc.Error
			switch last.Kind {
			case jsondoc.KindCheck:
				if last.Check.Exit != code {
					t.Errorf("check.exit %d, the command exits %d", last.Check.Exit, code)
				}
				if last.Check.Pass != (code == 0) {
					t.Errorf("check.pass %v at exit %d", last.Check.Pass, code)
				}
				if (last.Check.Free == nil) != (code == exitCheckInvalid) {
					t.Errorf("check.free %v at exit %d: null when no step was replayed, and only then", last.Check.Free, code)
				}
				e = last.Check.Error
			case jsondoc.KindError:
				e = last.Error
				if e != nil && e.Exit != code {
					t.Errorf("error.exit %d, the command exits %d", e.Exit, code)
				}
			}
			switch {
			case tc.message == "" && e != nil:
				t.Errorf("an error %+v on exit %d", *e, code)
			case tc.message == "":
			case e == nil:
				t.Fatalf("no error in the last document: %s", out.String())
			case !strings.Contains(e.Message, tc.message):
				t.Errorf("error.message %q lacks %q", e.Message, tc.message)
			case !strings.Contains(e.Hint, tc.hint):
				t.Errorf("error.hint %q lacks %q", e.Hint, tc.hint)
			}
		})
	}
}
