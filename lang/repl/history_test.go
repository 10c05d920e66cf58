package repl

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A line too long for an entry (a 2 MB paste) is neither written to the
// history file nor, when a file holds one, a reason to lose the rest of
// the history: later sessions read the other entries and go on saving.
func TestHistoryLongEntries(t *testing.T) {
	p := filepath.Join(t.TempDir(), "history")
	h, err := OpenHistory(p)
	if err != nil {
		t.Fatal(err)
	}
	long := "x = " + strings.Repeat("1", 2<<20)
	for _, e := range []string{"a = 1", long, "b = 2"} {
		if err := h.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff([]string{"a = 1", long, "b = 2"}, h.Entries()); d != "" {
		t.Errorf("session entries (-want +got):\n%s", d)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != "a = 1\nb = 2\n" {
		t.Errorf("history file %.80q, want the short entries only", raw)
	}

	// A file damaged by a long line (an older memsh wrote them).
	if err := os.WriteFile(p, []byte("a = 1\n"+long+"\nb = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err = OpenHistory(p)
	if err != nil {
		t.Fatalf("OpenHistory on a file with a long line: %v", err)
	}
	if err := h.Add("c = 3"); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a = 1", "b = 2", "c = 3"}, h.Entries()); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if h2, _ := OpenHistory(p); len(h2.Entries()) != 3 {
		t.Errorf("reopened: %d entries, want 3 (saving went on)", len(h2.Entries()))
	}
}

// A huge history file is read from its end, keeping the last
// MaxHistoryEntries entries.
func TestHistoryHugeFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "history")
	var b strings.Builder
	for i := range 2 * MaxHistoryEntries {
		b.WriteString("x = " + strings.Repeat("9", 300) + "  # " + string(rune('a'+i%26)) + "\n")
	}
	b.WriteString("last = 1\n")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHistory(p)
	if err != nil {
		t.Fatal(err)
	}
	e := h.Entries()
	if len(e) != MaxHistoryEntries || e[len(e)-1] != "last = 1" {
		t.Errorf("%d entries ending %q, want %d ending \"last = 1\"", len(e), e[len(e)-1], MaxHistoryEntries)
	}
}

// A history path that is a FIFO, a device or a folder is refused at once,
// without opening it (opening a FIFO waits for a writer); the history
// then lives in memory only.
func TestHistoryNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, tc := range []struct{ path, kind string }{
		{fifo, "a named pipe (FIFO)"},
		{"/dev/zero", "a character device"},
		{dir, "a folder"},
	} {
		done := make(chan struct{})
		var h *History
		var err error
		go func() {
			h, err = OpenHistory(tc.path)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("OpenHistory(%s) hangs", tc.path)
		}
		if err == nil || !strings.Contains(err.Error(), tc.kind+", not a regular file") {
			t.Errorf("OpenHistory(%s): %v, want an error naming %s", tc.path, err, tc.kind)
		}
		if err := h.Add("x = 1"); err != nil || len(h.Entries()) != 1 {
			t.Errorf("in-memory history after the error: %v, %v", err, h.Entries())
		}
	}
}
