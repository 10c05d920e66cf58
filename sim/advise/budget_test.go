package advise

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
)

// TestCheckBudget: a budget is bytes in (context, the GPU's memory]; one
// no larger than the CUDA context is refused (advise(plan, budget=1) took
// 1 as one byte and advised from there: no step fits it), as is one past
// the GPU; 0 is the GPU's memory. Each refusal names its builtin.
func TestCheckBudget(t *testing.T) {
	p := quickstart() // A100-80GB
	capacity, ctx := p.Device.Memory, minContext(p.Device)
	if ctx <= 0 || ctx >= capacity {
		t.Fatalf("context %d of %d", ctx, capacity)
	}
	for _, row := range []struct {
		budget, want int64
		err          string
	}{
		{0, capacity, ""},
		{1, 0, "advise: a budget of 1 B is no more than the CUDA context alone"},
		{ctx, 0, "no more than the CUDA context alone"},
		{ctx + 1, ctx + 1, ""},
		{capacity, capacity, ""},
		{capacity + 1, 0, "budget must be in (0, 79.26 GiB]"},
		{-1, 0, "budget must be in"},
	} {
		got, err := checkBudget("advise", p, row.budget)
		if row.err == "" && (err != nil || got != row.want) || row.err != "" && (err == nil || !strings.Contains(err.Error(), row.err)) {
			t.Errorf("budget %d: %d, %v; want %d, %q", row.budget, got, err, row.want, row.err)
		}
	}
	if _, err := MaxBatch(t.Context(), p, 1); err == nil || !strings.HasPrefix(err.Error(), "max_batch: a budget of 1 B") {
		t.Errorf("max_batch's refusal: %v", err)
	}
}

// TestBudgetAloneNoGPURescue: a plan its GPU holds that a budget alone
// turns away (no change brings a small Llama under 1 MiB above the
// context) gets no larger GPU from the rescue, which named the
// A100-80GB, 60 MiB larger than the H100-80GB that held the plan, and no
// "no GPU of the catalog fits it" either.
func TestBudgetAloneNoGPURescue(t *testing.T) {
	p := testmodels.LlamaPlan(testmodels.Llama(256, 2, 4, 4, 512, 1000, "flash"), 1, 128, "bf16-mixed", "none", "H100-80GB")
	res := run(t, p, Options{MaxChanges: 1, Budget: minContext(p.Device) + 1<<20})
	if !res.Base.Report.Fits || res.Base.Fits || res.AnyFits() {
		t.Fatalf("the GPU holds the plan %v, the budget %v, a row fits %v: want true, false, false", res.Base.Report.Fits, res.Base.Fits, res.AnyFits())
	}
	if res.Rescue == nil {
		t.Fatal("no rescue")
	}
	if g := res.Rescue.GPU; g != nil {
		t.Errorf("rescued by a larger GPU, %s, where the budget alone turns the plan away", g.Plan.Device.Name)
	}
	for _, n := range res.Rescue.Notes {
		if strings.Contains(n, "GPU of the catalog") {
			t.Errorf("note %q", n)
		}
	}
}
