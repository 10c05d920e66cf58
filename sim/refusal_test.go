package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestRefusalForIsValidateFor: the refusals worded when read
// (units.IntError: Ulysses' heads and key-value heads, interleaved
// micro-batches, sequence parallelism's tokens) read through RefusalFor
// as ValidateFor's, and ValidateFor hands its callers the *units.Error
// itself (the scripts' error printer reads its fields).
func TestRefusalForIsValidateFor(t *testing.T) {
	m := testmodels.Llama(256, 8, 8, 2, 704, 1000, "flash") // 8 heads, 2 key-value heads
	for _, row := range []struct {
		name string
		par  core.Parallelism
		want string
	}{
		{"ulysses heads", core.Parallelism{CP: 16, CPMode: "ulysses"}, "cp=16 does not divide the 8 attention heads"},
		{"ulysses kv heads", core.Parallelism{CP: 4, CPMode: "ulysses"}, "cp=4 does not divide the 2 key-value heads"},
		{"interleaved", core.Parallelism{PP: 2, VirtualStages: 2, Schedule: "interleaved", MicroBatches: 3}, "micro_batches divisible by pp (micro_batches=3, pp=2)"},
		{"sequence parallel", core.Parallelism{TP: 3, SequenceParallel: true}, "sequence_parallel: tp=3 does not divide"},
	} {
		p := testmodels.LlamaPlan(m, 12, 4096, "bf16-mixed", "none", "H100-80GB")
		p.Parallel = row.par
		n := row.par.Norm()
		p.Cluster = hw.Cluster{Nodes: 1, GPUsPerNode: n.DP * n.TP * n.PP * n.CP}
		refusal, err := p.RefusalFor(m), p.ValidateFor(m)
		if _, ok := refusal.(*units.IntError); !ok {
			t.Errorf("%s: RefusalFor gives %T (%v), want a *units.IntError", row.name, refusal, refusal)
			continue
		}
		se, ok := err.(*units.Error)
		if !ok {
			t.Errorf("%s: ValidateFor gives %T (%v), want a *units.Error", row.name, err, err)
			continue
		}
		var as *units.Error
		if err.Error() != refusal.Error() || !errors.As(refusal, &as) || *as != *se {
			t.Errorf("%s: RefusalFor reads %q (%+v), ValidateFor %q (%+v)", row.name, refusal, as, err, se)
		}
		if !strings.Contains(se.Msg, row.want) {
			t.Errorf("%s: %q, want %q in it", row.name, se.Msg, row.want)
		}
	}
}
