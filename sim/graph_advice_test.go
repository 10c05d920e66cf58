package sim

import (
	"strings"
	"testing"
)

// The notes on the story's failures say which setting changes the failing
// tensor.
func TestGraphAdvice(t *testing.T) {
	for _, c := range []struct {
		name               string
		members            int64
		mode               string
		chunks, evalChunks int64
		want               string
	}{
		{"4 stacked, validation", 4, "stacked", 16, 1, "the validation pass splits the encoder's edges into eval_chunks=1 pieces, not chunks=16"},
		{"2 stacked, training", 2, "stacked", 16, 32, "decoder.proc.conv.chunk4.scatter_out spans all 2718562 destination rows of the 2 stacked members: no edge chunking shrinks it; members_mode=\"sequential\""},
		{"4 sequential", 4, "sequential", 4, 32, "the backward recomputes 4 of the processor's 16 layers at once (segments=4"},
	} {
		r := attempt(t, c.members, c.mode, c.chunks, c.evalChunks)
		if r.OOM == nil {
			t.Fatalf("%s: fits", c.name)
		}
		if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], c.want) {
			t.Errorf("%s: notes %q, want one containing %q", c.name, r.Notes, c.want)
		}
	}
	if r := attempt(t, 3, "sequential", 4, 32); len(r.Notes) != 0 {
		t.Errorf("3 sequential members fit, yet notes %q", r.Notes)
	}
}
