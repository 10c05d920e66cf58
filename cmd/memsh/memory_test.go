package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0},
		{in: "1073741824", want: 1 << 30},
		{in: "8GiB", want: 8 << 30},
		{in: "8gib", want: 8 << 30},
		{in: "1.5 GiB", want: 3 << 29},
		{in: "512MiB", want: 512 << 20},
		{in: "500MB", want: 500e6},
		{in: "2TB", want: 2e12},
		{in: "100B", want: 100},
		{in: "-1GiB", bad: true},
		{in: "GiB", bad: true},
		{in: "8 parsecs", bad: true},
		{in: "9e30", bad: true},
	} {
		got, err := parseSize(tc.in)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestDefaultMaxMemory(t *testing.T) {
	if got := defaultMaxMemory(func() int64 { return 64 << 30 }); got != 16<<30 {
		t.Errorf("64 GiB machine: %d, want a quarter, 16 GiB", got)
	}
	if got := defaultMaxMemory(func() int64 { return 0 }); got != 4<<30 {
		t.Errorf("unknown machine memory: %d, want 4 GiB", got)
	}
	if got := machineMemory(); got < 0 {
		t.Errorf("machineMemory() = %d", got)
	}
}

// Memory bombs under the default limit (a quarter of the machine's
// memory: a 256 MiB machine here, so 64 MiB) end with an error at the
// statement that names --max-memory, and no Go stack dump: a string
// doubled forty times, a list of 20 million values, a list grown without
// end, and the same at the REPL, whose session goes on.
func TestMemoryBombs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, src, stdin, want, stdout string
	}{
		// The watcher samples the heap: the error is at the loop's line or
		// its body's (the loop's on a loaded machine).
		{name: "a string doubled forty times", src: "s = \"x\"\nfor i in range(40):\n    s = s + s\n",
			want: `bomb.star:(2:\d+: error: memory use passed the limit of 64\.00 MiB \(use --max-memory to raise\)\n    2 \| for|3:11: error: memory use passed the limit of 64\.00 MiB \(use --max-memory to raise\)\n    3 \|     s = s \+ s\n)`},
		// One allocation of 320 MB: memsh sees it while the list is filled
		// or at a statement soon after, and the script goes no further.
		{name: "a list of 20 million values", src: "l = [0] * 20000000\nfor i in range(10000000):\n    pass\nprint(len(l))\n",
			want: `error: memory use passed the limit of 64\.00 MiB \(use --max-memory to raise\)`},
		{name: "a list grown without end", src: "l = []\nfor i in range(1000):\n    l.append([i] * 1000000)\n",
			want: `error: memory use passed the limit of 64\.00 MiB \(use --max-memory to raise\)`},
		{name: "at the REPL", stdin: "s = \"x\"\nfor i in range(40):\n    s = s + s\n\nprint(\"goes on\")\n",
			want: `<stdin:2>:(1:\d+|2:11): error: memory use passed the limit of 64\.00 MiB \(use --max-memory to raise\)`, stdout: "goes on\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{}
			if tc.src != "" {
				p := filepath.Join(dir, "bomb.star")
				if err := os.WriteFile(p, []byte(tc.src), 0o644); err != nil {
					t.Fatal(err)
				}
				args = []string{"run", p}
			}
			var out, errb bytes.Buffer
			e := &env{ctx: context.Background(), stdin: strings.NewReader(tc.stdin), stdout: &out, stderr: &errb,
				getenv: func(string) string { return "" }, ram: func() int64 { return 256 << 20 }}
			if code := e.exitCode(args); code != exitError {
				t.Errorf("exit %d, want %d", code, exitError)
			}
			got := strings.ReplaceAll(errb.String(), dir+"/", "")
			if !regexp.MustCompile(tc.want).MatchString(got) || strings.Contains(got, "goroutine") || strings.Contains(got, "internal error") {
				t.Errorf("stderr %q, want it to match %q", got, tc.want)
			}
			if out.String() != tc.stdout {
				t.Errorf("stdout %q, want %q", out.String(), tc.stdout)
			}
		})
	}
}
