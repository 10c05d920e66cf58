package sim

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
)

// A lowering looks at its caller's context before each member and each
// repeated block (core.Plan.LowerProgramUnder, the stop Evaluate passes
// is Options.Stopped), so a script's timeout holds while a large model
// lowers: 4 sequential members of 6 blocks look at least 4 x 6 times and
// stop at the look the context is done; a context never done lowers the
// same program as LowerProgram.
func TestLoweringStopsWithTheContext(t *testing.T) {
	p := testmodels.LlamaPlan(testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash"), 4, 64, "bf16-mixed", "none", "H100-80GB")
	p.Members, p.MembersMode = 4, "sequential"
	want, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	looks := 0
	got, err := p.LowerProgramUnder(core.ProgramSize{}, nil, func() error { looks++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("a lowering that is never stopped differs from LowerProgram's")
	}
	if looks < 4*6 {
		t.Errorf("%d looks at the context, want one before each of the 4 members and their 6 blocks at least", looks)
	}
	for _, at := range []int{1, 2, looks / 2, looks} {
		n := 0
		stopErr := errors.New("stopped")
		prog, err := p.LowerProgramUnder(core.ProgramSize{}, nil, func() error {
			if n++; n >= at {
				return stopErr
			}
			return nil
		})
		if prog != nil || !errors.Is(err, stopErr) || n != at {
			t.Errorf("stopped at look %d: program %v, error %v after %d looks", at, prog != nil, err, n)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Evaluate(p, core.Options{Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Errorf("Evaluate under a cancelled context: %v, want context.Canceled", err)
	}
}
