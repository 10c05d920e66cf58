package sim

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
)

// FuzzHFConfig feeds FromHFConfigArch arbitrary JSON (seeded with the
// real configs in testdata/hf): it must return a model or an error, never
// panic. A model it returns must have a positive, exact-looking parameter
// count and simulate a small step to a report that keeps the report
// invariants (or to an error).
func FuzzHFConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "hf", "*.json"))
	for i, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		attn := []string{"sdpa", "eager", "flash"}[i%3]
		f.Add(data, attn, "")
	}
	f.Add([]byte(`{"model_type": "llama", "hidden_size": -1}`), "sdpa", "")
	f.Add([]byte(`{"model_type": "bert", "hidden_size": 1e300}`), "eager", "BertModel")
	f.Fuzz(func(t *testing.T, data []byte, attn, arch string) {
		defer failSlow(t, time.Now())
		fuzzHFConfigInput(t, data, attn, arch)
	})
}

// fuzzHFConfigInput is FuzzHFConfig's check of one input.
func fuzzHFConfigInput(t testing.TB, data []byte, attn, arch string) {
	m, err := hf.FromConfigArch(data, attn, arch)
	if err != nil {
		if strings.Contains(err.Error(), "internal error") {
			t.Fatalf("internal error: %v", err)
		}
		return
	}
	if m == nil {
		t.Fatal("no model and no error")
	}
	if n := m.Params(); n <= 0 {
		t.Fatalf("model params %d", n)
	}
	fuzzSimulate(t, m)
}

// fuzzSimulate evaluates a short bf16-mixed AdamW step of m (one sequence
// of 8 tokens) and checks the report invariants.
func fuzzSimulate(t testing.TB, m *core.Model) {
	t.Helper()
	prec, _ := core.LookupPrecision("bf16-mixed")
	rt, _ := core.LookupRuntime("cuda")
	dev, _ := hw.LookupDevice("H100-80GB")
	p := &core.Plan{Model: m, Batch: 1, Seq: 8, GradAccum: 1, Members: 1, Precision: prec, Runtime: rt,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"}, Phase: core.Train, Device: dev}
	if m.Points > 0 {
		p.Seq = 1
	}
	rep, err := Evaluate(p, core.Options{})
	if err != nil {
		if strings.Contains(err.Error(), "internal error") {
			t.Fatalf("internal error: %v", err)
		}
		return
	}
	if probs := reportProblems(rep); len(probs) > 0 {
		t.Fatalf("report breaks invariants:\n%s", strings.Join(probs, "\n"))
	}
}

// failSlow fails, while fuzzing (go test -fuzz), an input that took more
// than eight seconds: a hostile input the caps (maxOps, maxParamTensors)
// should have bounded. A legitimate program takes a second or two to
// lower and replay, about three times that in the fuzzer's instrumented
// build. Eight, not ten: Go's fuzz worker panics on an input past 10 s
// and records no crasher (internal/fuzz/worker.go, RunFuzzWorker), so an
// input failed here between 8 and 10 s is written to testdata/fuzz. The seeds a
// plain go test runs are not timed (on a loaded machine a wall clock says
// nothing); BenchmarkFuzzCorpus prices them instead.
func failSlow(t *testing.T, start time.Time) {
	if !fuzzing() {
		return
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("input took %v", d)
	}
}

// fuzzing reports whether the test binary runs with -test.fuzz.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}
