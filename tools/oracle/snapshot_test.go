package oracle

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/lang"
	"github.com/memsh/memsh/snapshot"
)

// Snapshots recorded from PyTorch on the CPU by snapshot.py (torch 2.15.0,
// one thread), two layers each:
//
//	python snapshot.py --config snapshots/llama_fp32.json --layers 2 --out snapshots/llama_fp32.pickle
//	python snapshot.py --vector vectors/issue29.jsonl --id issue29 --layers 2 --out snapshots/issue29.pickle

// predictedSnapshot is memsh's snapshot of configuration c at this depth:
// the vector's script run through the interpreter, its report replayed
// with the device trace.
func predictedSnapshot(t *testing.T, c Config, layers int64) *snapshot.Snapshot {
	t.Helper()
	src, err := Script(c, layers)
	if err != nil {
		t.Fatal(err)
	}
	in := lang.New(lang.Options{})
	defer in.Close()
	g, err := in.ExecFile(context.Background(), "snapshot.star", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	sim, ok := g["r"].(host.Simulation)
	if !ok {
		t.Fatalf("the script's r is a %T, not a report", g["r"])
	}
	rep, err := sim.WithTrace()
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.FromReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readSnapshot(t *testing.T, name string) *snapshot.Snapshot {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Read(data)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func readConfig(t *testing.T, name string) Config {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSnapshotPeaks checks memsh's peak of allocated memory against
// PyTorch's recorded steps. Measured (snapshot.py, requested bytes, no
// allocator rounding on the CPU): llama_fp32 34,488,412 B (32.89 MiB),
// memsh -0.4 %; issue29 (autocast bf16, eager attention, selective
// reentrant checkpointing) 105,351,516 B (100.47 MiB), memsh -4.7 %: the
// CPU's eager attention and RMSNorm backward allocate more short-lived
// temporaries than the CUDA kernels memsh models (compare lists them).
func TestSnapshotPeaks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		config   Config
		pickle   string
		measured int64
		tol      float64
	}{
		{"llama_fp32", readConfig(t, "snapshots/llama_fp32.json"), "snapshots/llama_fp32.pickle", 34488412, 0.01},
		{"issue29", issue29Config(t), "snapshots/issue29.pickle", 105351516, 0.06},
	} {
		t.Run(tc.name, func(t *testing.T) {
			measured := readSnapshot(t, tc.pickle)
			c := snapshot.Compare(measured, predictedSnapshot(t, tc.config, 2))
			if c.Measured.PeakAllocated != tc.measured {
				t.Errorf("the recorded peak is %d, the test says %d: re-record or fix the figure", c.Measured.PeakAllocated, tc.measured)
			}
			rel := float64(c.Predicted.PeakAllocated-c.Measured.PeakAllocated) / float64(c.Measured.PeakAllocated)
			t.Logf("memsh's peak %d, PyTorch's %d (%+.1f %%, tolerance %.0f %%)", c.Predicted.PeakAllocated, c.Measured.PeakAllocated, 100*rel, 100*tc.tol)
			if rel < -tc.tol || rel > tc.tol {
				t.Errorf("memsh's peak %d is %+.1f%% off PyTorch's %d (tolerance %.0f%%)", c.Predicted.PeakAllocated, 100*rel, c.Measured.PeakAllocated, 100*tc.tol)
			}
			if c.Measured.Segments {
				t.Error("a CPU recording has no segments")
			}
		})
	}
}

func issue29Config(t *testing.T) Config {
	t.Helper()
	vs, err := ReadVectors("vectors/issue29.jsonl")
	if err != nil || len(vs) != 1 {
		t.Fatalf("vectors/issue29.jsonl: %v (%d vectors)", err, len(vs))
	}
	return vs[0].Config
}

// TestCompareFindsWrongLowering compares the step PyTorch recorded with
// memsh's prediction for the same configuration, and with one lowered
// wrongly on purpose (the MLP's hidden width 512 where the model has
// 688). The module rows that differ more in the wrong comparison than in
// the right one must all be in the MLP (its layers and, in setup, its
// parameters and their optimizer state) or the optimizer step that spans
// every parameter; none may grow more than the MLP's largest.
func TestCompareFindsWrongLowering(t *testing.T) {
	measured := readSnapshot(t, "snapshots/llama_fp32.pickle")
	c := readConfig(t, "snapshots/llama_fp32.json")
	right := snapshot.Compare(measured, predictedSnapshot(t, c, 2))
	c.FFN = 512
	wrong := snapshot.Compare(measured, predictedSnapshot(t, c, 2))

	type key struct{ module, phase string }
	gap := func(cmp *snapshot.Comparison) map[key]int64 {
		out := map[key]int64{}
		for _, m := range cmp.Modules {
			d := m.Measured - m.Predicted
			if d < 0 {
				d = -d
			}
			out[key{m.Module, m.Phase}] = d
		}
		return out
	}
	before, after := gap(right), gap(wrong)
	var mlp, other int64 // the largest growth in the MLP, and elsewhere
	for k, d := range after {
		growth := d - before[k]
		if growth <= 0 {
			continue
		}
		inMLP := strings.HasPrefix(k.module, "layers.*.mlp")
		if !inMLP && k.module != "optimizer.step" {
			t.Errorf("%s (%s) differs by %d more bytes with the wrong MLP: outside the MLP", k.module, k.phase, growth)
		}
		if inMLP {
			mlp = max(mlp, growth)
		} else {
			other = max(other, growth)
		}
	}
	if mlp == 0 || mlp < other {
		t.Errorf("the largest new difference in the MLP is %d bytes, elsewhere %d: the MLP should stand out", mlp, other)
	}
	// The wrong MLP is narrower: memsh misses bytes there, and the rendering
	// says so.
	var b strings.Builder
	if err := wrong.Render(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "layers.*.mlp") || !strings.Contains(b.String(), "missed") {
		t.Errorf("the rendering does not point to the MLP:\n%s", b.String())
	}
}
