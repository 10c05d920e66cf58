package repl

import (
	"context"
	"fmt"
	"io"
	"testing"
	"testing/fstest"

	"github.com/memsh/memsh/lang"
)

// listLiteral is a statement of n+2 lines: x = [ 0, 1, ... ], one element
// a line, then the length of x.
func listLiteral(n int) []string {
	lines := []string{"x = ["}
	for i := range n {
		lines = append(lines, fmt.Sprintf("    %d,", i))
	}
	return append(lines, "]", "len(x)")
}

// readStatement runs lines through a plain session.
func readStatement(lines []string) {
	in := lang.New(lang.Options{Files: fstest.MapFS{}, Root: "."})
	defer in.Close()
	Run(context.Background(), &fakeReader{lines: lines}, io.Discard, io.Discard, in, Options{})
}

// Reading a statement is linear in its lines: a 4,000-line list literal
// costs about twice the allocations of a 2,000-line one. Parsing the
// statement again at each new line made it four times (a 40,000-line
// literal piped in took five minutes).
func TestContinuationIsLinear(t *testing.T) {
	allocs := func(n int) float64 {
		lines := listLiteral(n)
		return testing.AllocsPerRun(2, func() { readStatement(lines) })
	}
	small, large := allocs(2000), allocs(4000)
	if large > 2.5*small {
		t.Errorf("a statement of 4,000 lines allocates %.0f times, %.1fx one of 2,000 lines (%.0f): want about 2x", large, large/small, small)
	}
}

func BenchmarkContinuation40000Lines(b *testing.B) {
	lines := listLiteral(40000)
	for b.Loop() {
		readStatement(lines)
	}
}
