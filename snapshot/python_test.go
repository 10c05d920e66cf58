package snapshot

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
