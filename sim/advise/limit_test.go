package advise

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// randomPlan is a small Llama-style plan on a card of a few GiB, so that
// its largest batch is small enough to scan one by one.
func randomPlan(r *rand.Rand) *core.Plan {
	hidden := []int64{256, 512, 768, 1024}[r.Intn(4)]
	heads := hidden / 64
	layers := int64(2 + r.Intn(10))
	ffn := hidden * []int64{2, 4}[r.Intn(2)]
	vocab := []int64{8000, 32000}[r.Intn(2)]
	m := testmodels.Llama(hidden, layers, heads, heads, ffn, vocab, []string{"flash", "eager"}[r.Intn(2)])
	p := testmodels.LlamaPlan(m, 1, []int64{256, 512, 1024}[r.Intn(3)],
		[]string{"fp32", "bf16-mixed", "bf16"}[r.Intn(3)], []string{"none", "full", "selective"}[r.Intn(3)], "A100-80GB")
	p.Device = hw.Device{Name: "test", Memory: int64(2+r.Intn(7)) << 30, BF16TFLOPS: 312, HBMGBps: 1555, PCIeGBps: 32, Context: 300 << 20}
	p.GradAccum = int64(1 + r.Intn(2))
	p.ExpandableSegments = r.Intn(2) == 0
	return p
}

// fitsAt replays p with set(v) applied.
func fitsAt(t *testing.T, p *core.Plan, v int64, set func(*core.Plan, int64)) bool {
	t.Helper()
	q := *p
	set(&q, v)
	rep, err := sim.Evaluate(&q, core.Options{})
	if err != nil {
		if rejected(err) {
			return false
		}
		t.Fatal(err)
	}
	return rep.Fits
}

// TestMaxBatchAgreesWithScan: on 20 random plans, max_batch is the
// largest micro-batch a scan of every batch finds fitting (all below fit,
// none of the next ones), in under 50 replays.
func TestMaxBatchAgreesWithScan(t *testing.T) {
	r := rand.New(rand.NewSource(21))
	setBatch := func(q *core.Plan, v int64) { q.Batch = v }
	for i := 0; i < 20; i++ {
		p := randomPlan(r)
		name := fmt.Sprintf("plan%d(L%d,%d GiB,%s,%s)", i, p.Model.Layers[1].(*core.Repeat).N, p.Device.Memory>>30, p.Precision.Name, p.Checkpoint.Mode)
		lim, err := MaxBatch(context.Background(), p, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if lim.Replays >= 50 {
			t.Errorf("%s: %d replays", name, lim.Replays)
		}
		if lim.Capped {
			t.Fatalf("%s: capped at %d", name, lim.Value)
		}
		for b := int64(1); b <= lim.Value+4; b++ {
			if got, want := fitsAt(t, p, b, setBatch), b <= lim.Value; got != want {
				t.Errorf("%s: max_batch %d, but batch %d fits=%v", name, lim.Value, b, got)
			}
		}
		if lim.NextReport == nil || lim.NextReport.Fits || lim.Next != lim.Value+1 {
			t.Errorf("%s: next %d should be the first failing batch", name, lim.Next)
		}
		t.Logf("%s: max_batch %d in %d replays", name, lim.Value, lim.Replays)
	}
}

// TestMaxSeqAgreesWithScan: on 20 random plans, max_seq fits, one token
// more does not, and a sweep of 32 lengths up to twice the answer finds
// every length below it fitting and none above.
func TestMaxSeqAgreesWithScan(t *testing.T) {
	r := rand.New(rand.NewSource(17))
	setSeq := func(q *core.Plan, v int64) { q.Seq = v }
	for i := 0; i < 20; i++ {
		p := randomPlan(r)
		p.Batch = int64(1 + r.Intn(4))
		name := fmt.Sprintf("plan%d(%d GiB,%s,%s)", i, p.Device.Memory>>30, p.Precision.Name, p.Checkpoint.Mode)
		lim, err := MaxSeq(context.Background(), p, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if lim.Replays >= 50 {
			t.Errorf("%s: %d replays", name, lim.Replays)
		}
		if lim.Capped {
			t.Fatalf("%s: max_seq capped at %d", name, lim.Value)
		}
		if lim.Value == 0 { // the model states alone do not fit
			if fitsAt(t, p, 1, setSeq) || lim.NextReport == nil || lim.NextReport.Fits {
				t.Errorf("%s: max_seq 0 but seq 1 fits", name)
			}
			continue
		}
		stride := max(lim.Value/16, 1)
		for s := stride; s <= 2*lim.Value; s += stride {
			if got, want := fitsAt(t, p, s, setSeq), s <= lim.Value; got != want {
				t.Errorf("%s: max_seq %d, but seq %d fits=%v", name, lim.Value, s, got)
			}
		}
		if !fitsAt(t, p, lim.Value, setSeq) || fitsAt(t, p, lim.Value+1, setSeq) {
			t.Errorf("%s: max_seq %d is not the boundary", name, lim.Value)
		}
		t.Logf("%s: max_seq %d in %d replays", name, lim.Value, lim.Replays)
	}
}
