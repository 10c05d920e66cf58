package lang

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"
)

// A guarded range is a range in every way a script can tell.
func TestGuardedRangeIsARange(t *testing.T) {
	src := `r = range(10)
print(r, type(r), len(r), r[3], r[-1], r[2:5], r[::-1] == range(9, -1, -1), bool(range(0)))
print(3 in r, 11 in r, 12 not in r, r == range(10), r != range(0, 10, 2), r == range(0, 10))
print(list(r)[:3], sorted(r, reverse = True)[:2], max(r), min(r), any(r), all(r), reversed(range(3)), tuple(range(2)))
print(enumerate(range(2)), zip(range(2), range(3)), set(range(3)), [x for x in r if x > 7])
l = []
l.extend(range(3))
print(l, ",".join([str(x) for x in range(3)]), str(range(1, 7, 2)), repr(range(2)))
`
	want := `range(10) range 10 3 9 range(2, 5) True False
True False True True True True
[0, 1, 2] [9, 8] 9 0 True False [2, 1, 0] (0, 1)
[(0, 0), (1, 1)] [(0, 0), (1, 1)] set([0, 1, 2]) [8, 9]
[0, 1, 2] 0,1,2 range(1, 7, 2) range(2)
`
	var out bytes.Buffer
	in := New(Options{Stdout: &out, Files: tree("main.star", src)})
	if _, err := in.RunFile(context.Background(), "main.star"); err != nil {
		var b bytes.Buffer
		in.FormatError(&b, err, false)
		t.Fatal(b.String())
	}
	if d := cmp.Diff(want, out.String()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// Starlark's builtins, which run in Go between steps, stop with the run:
// iterating a range from Go counts a step per element and looks at the
// run's context, and a builtin that would allocate for a whole huge range
// at once refuses it (it was a Go panic, or a fatal out-of-memory), all
// with an error at the statement.
func TestGuardedBuiltinsStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		opts Options
		ctx  context.Context
		want string
	}{
		{"list of a 2^62 range panicked in makeslice", "x = list(range(4611686018427387904))\n", Options{}, nil,
			"main.star:1:9: error: list of range(4611686018427387904) would hold 4611686018427387904 values (4.00 EiB at least), more than memsh makes at once (1073741824 values)"},
		{"sorted of a range past the memory limit", "x = sorted(range(1000000))\n", Options{MaxMemory: 1 << 20}, nil,
			"main.star:1:11: error: sorted of range(1000000) would hold 1000000 values (15.26 MiB at least), more than memsh makes at once (the memory limit of 1.00 MiB: use --max-memory to raise it)"},
		{"tuple of a 2^33 range was a fatal out-of-memory", "x = tuple(range(8589934592))\n", Options{}, nil,
			"more than memsh makes at once (1073741824 values)"},
		{"max of a 2^62 range never ended", "x = max(range(4611686018427387904))\n", Options{MaxSteps: 1_000_000}, nil,
			"main.star:1:8: error: execution exceeded 1000000 steps (use --max-steps to raise)"},
		{"list.extend of a 2^62 range grew without end", "l = []\nl.extend(range(4611686018427387904))\nprint(len(l))\n", Options{MaxSteps: 1_000_000}, nil,
			"main.star:2:9: error: execution exceeded 1000000 steps (use --max-steps to raise)"},
		{"str.join stops too", "s = \",\".join([str(i) for i in range(10)]) + \",\".join(range(4611686018427387904))\n", Options{MaxSteps: 1_000_000}, nil,
			"join: in list, want string, got int"},
		{"a cancelled run stops the iteration", "x = all(range(1, 4611686018427387904))\n", Options{MaxSteps: 1 << 62}, doneUnsignalled{context.Background()},
			"main.star:1:8: error: interrupted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			opts := tc.opts
			opts.Files = tree("main.star", tc.src)
			in := New(opts)
			_, err := in.RunFile(ctx, "main.star")
			var b bytes.Buffer
			in.FormatError(&b, err, false)
			if err == nil || !strings.Contains(b.String(), tc.want) {
				t.Fatalf("got %q, want an error containing %q", b.String(), tc.want)
			}
		})
	}
}

// A Go panic in a guarded builtin is an error at the call, not a stack
// dump.
func TestGuardedBuiltinRecovers(t *testing.T) {
	in := New(Options{})
	boom := starlark.NewBuiltin("boom", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		var s []int
		return starlark.MakeInt(s[3]), nil
	})
	thread, stop := in.NewThread(context.Background())
	defer stop()
	_, err := starlark.Call(thread, starlark.NewBuiltin("boom", in.guardBuiltin(boom)), nil, nil)
	if err == nil || !strings.Contains(err.Error(), "internal error in boom: runtime error: index out of range [3] with length 0") {
		t.Fatalf("got %v", err)
	}
}

// doneUnsignalled is a context that is done but never closes its Done
// channel: only what polls Err sees it (the guarded iteration), not the
// thread's own cancellation on Done.
type doneUnsignalled struct{ context.Context }

func (doneUnsignalled) Err() error { return context.Canceled }
