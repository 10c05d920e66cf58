package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// TestVarlenTime: flash-attn's varlen kernel over a packed row's documents
// (core.OpInfo.Varlen) prices each document at its own length. Eight
// documents of 1,024 tokens cost what a batch of 8 causal rows of 1,024
// costs (the same FLOPs, rate and blocks), forward and backward; the same
// FLOPs as one causal row of 8,192 would run at the longer sequence's
// higher rate, so the documents take longer; and a row whose short
// documents carry a share of the FLOPs runs slower than its FLOPs at the
// long document's rate alone.
func TestVarlenTime(t *testing.T) {
	d := mustDevice(t, "H100")
	k := d.RatesRef().Flash
	const heads, width = 32, 128
	eight := []int64{1024, 1024, 1024, 1024, 1024, 1024, 1024, 1024}
	flops := 4 * width * heads * 8 * 1024 * 1025 / 2.0
	fwd, bwd, _ := varlenTime(&d, units.BF16, k, eight, flops, heads, 8192)
	batch := attnShape{flops: flops, seq: 1024, causal: true, blocks: 8 * heads * ceilDiv(1024, attnBlockRows)}
	wf, _ := attentionTime(&d, units.BF16, k, batch, false)
	wb, _ := attentionTime(&d, units.BF16, k, batch, true)
	if math.Abs(fwd-wf) > 1e-12*wf || math.Abs(bwd-wb) > 1e-12*wb {
		t.Errorf("8 documents of 1,024: %g / %g s, a batch of 8 rows: %g / %g s", fwd, bwd, wf, wb)
	}
	row := attnShape{flops: flops, seq: 8192, causal: true, blocks: heads * ceilDiv(8192, attnBlockRows)}
	if rf, _ := attentionTime(&d, units.BF16, k, row, false); !(fwd > rf) {
		t.Errorf("8 documents of 1,024 forward %g s, not slower than their FLOPs at 8,192's rate (%g s)", fwd, rf)
	}
	mixed := []int64{7168, 128, 128, 128, 128, 128, 128, 128, 128}
	var pairs float64
	for _, l := range mixed {
		pairs += float64(l) * float64(l+1) / 2
	}
	mf := 4 * width * heads * pairs
	got, _, _ := varlenTime(&d, units.BF16, k, mixed, mf, heads, 8192)
	long := attnShape{flops: mf, seq: 7168, causal: true, blocks: heads * (ceilDiv(7168, attnBlockRows) + 8)}
	if lf, _ := attentionTime(&d, units.BF16, k, long, false); !(got > lf) {
		t.Errorf("7,168 + 8 x 128 forward %g s, not slower than all its FLOPs at 7,168's rate (%g s)", got, lf)
	}
}
