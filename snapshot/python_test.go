package snapshot

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
)

// python is a Python with torch: $MEMSH_PYTHON, else python3 (Debian's
// python3-torch). Tests that need it skip when neither imports torch.
func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("MEMSH_PYTHON")
	if py == "" {
		py = "python3"
	}
	if err := exec.Command(py, "-c", "import torch.cuda._memory_viz").Run(); err != nil {
		t.Skipf("no Python with torch (%s): set MEMSH_PYTHON to one", py)
	}
	return py
}

// TestTorchReadsIt loads a snapshot memsh wrote with pickle.load and runs
// PyTorch's own readers over it (torch.cuda._memory_viz segsum and trace,
// which the memory viewer's Python side uses).
func TestTorchReadsIt(t *testing.T) {
	py := python(t)
	path := filepath.Join(t.TempDir(), "snap.pickle")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample().Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	script := `
import pickle, sys
from torch.cuda import _memory_viz as mv
d = pickle.load(open(sys.argv[1], "rb"))
print(mv.segsum(d))
print(mv.trace(d))
`
	out, err := exec.Command(py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("torch could not read the snapshot: %v\n%s", err, out)
	}
	for _, want := range []string{"segments: 1", "5 entries", "cudaMalloc"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("torch's reading lacks %q:\n%s", want, out)
		}
	}
}

// TestTorchPeaks writes a replayed step's snapshot, loads it with pickle
// and recomputes the peaks from its device trace in Python, as PyTorch's
// memory viewer does (requested bytes allocated until their free request,
// segments reserved); they equal the replay's.
func TestTorchPeaks(t *testing.T) {
	py := python(t)
	m := testmodels.Llama(512, 4, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16-mixed", "full", "RTX-3090")
	rep, err := sim.Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := FromReport(rep)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "step.pickle")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	script := `
import pickle, sys
from torch.cuda import _memory_viz as mv
d = pickle.load(open(sys.argv[1], "rb"))
mv.segsum(d)
a = r = pa = pr = 0
for e in d["device_traces"][0]:
    k = e["action"]
    if k == "alloc": a += e["size"]
    elif k == "free_requested": a -= e["size"]
    elif k in ("segment_alloc", "segment_map"): r += e["size"]
    elif k in ("segment_free", "segment_unmap"): r -= e["size"]
    pa, pr = max(pa, a), max(pr, r)
print(pa, pr)
`
	out, err := exec.Command(py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("torch could not read the snapshot: %v\n%s", err, out)
	}
	want := fmt.Sprintf("%d %d", rep.Trace.PeakRequested, rep.PeakReserved)
	if got := strings.TrimSpace(string(out)); got != want {
		t.Errorf("peaks from the pickle %s, report %s", got, want)
	}
}
