package timing

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// The train metrics counted by hand for MPT-125m's micro-batch on an
// A100-80GB (a stream at 0.75 of 2,039 GB/s): 81,920 rows of 50,368
// bf16 logits, 8.25 GB. Under autocast each metric casts them to fp32
// (read 2 B, write 4 B an element), then log_softmax reads the fp32 copy
// three times and writes it once (a row of 201 KB is wider than 48 KiB);
// nll_loss reads and writes a label's bytes a row (under the floor); four small kernels at
// the 2 µs floor. Without autocast the bf16 logits are read three times
// and written once (100 KB rows). An evaluation, or no metric, costs 0.
func TestTrainMetricsByHand(t *testing.T) {
	a100, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	const rows, vocab = 81920.0, 50368.0
	elems := rows * vocab
	stream := 2039e9 * 0.75
	labels := 8 * rows
	small := math.Max(2*labels/stream, kernelFloor) + 4*kernelFloor // nll_loss under the floor
	prog := &core.Program{
		Values: []core.ValueInfo{
			{Name: "logits", Shape: []int64{rows, vocab}, Dtype: units.BF16, Bytes: int64(2 * elems)},
			{Name: "labels", Shape: []int64{rows}, Dtype: units.INT64, Bytes: int64(labels)},
		},
		Ops: []core.OpInfo{{Kind: "cross_entropy", Name: "cross_entropy", In: []core.Value{0, 1}}},
	}
	for _, c := range []struct {
		name      string
		precision string
		metrics   int64
		phase     core.Phase
		want      float64
	}{
		{"none", "bf16-mixed", 0, core.Train, 0},
		{"two under autocast", "bf16-mixed", 2, core.Train, 2 * ((6*elems+16*elems)/stream + small)},
		{"one in bf16", "bf16", 1, core.Train, 8*elems/stream + small},
		{"evaluation", "bf16-mixed", 2, core.Eval, 0},
	} {
		prec, err := core.LookupPrecision(c.precision)
		if err != nil {
			t.Fatal(err)
		}
		p := &core.Plan{Device: a100, Precision: prec, Phase: c.phase, Overheads: core.Overheads{TrainMetrics: c.metrics}}
		_, got, note := trainMetricsTime(prog, p)
		if math.Abs(got-c.want) > 1e-6*c.want+1e-12 || note != "" {
			t.Errorf("%s: %.3f ms (note %q), want %.3f ms and no note", c.name, 1e3*got, note, 1e3*c.want)
		}
	}
	// Metrics asked for where no rank holds whole logits cost 0 and say
	// why in a note: a chunked loss (loss_chunks=2: a cross_entropy op a
	// chunk; one chunk's would price a fraction of them), loss
	// parallelism (the op reads the local vocabulary shard only), a
	// cross-entropy fused with the output projection, another loss. A
	// pipeline stage before the loss has none to price and says nothing.
	prec, _ := core.LookupPrecision("bf16-mixed")
	p := &core.Plan{Device: a100, Precision: prec, Phase: core.Train, Overheads: core.Overheads{TrainMetrics: 2}}
	ce, logits := prog.Ops[0], core.Value(0)
	for _, c := range []struct {
		name string
		ops  []core.OpInfo
		note string
	}{
		{"chunked", []core.OpInfo{ce, ce}, "the loss is chunked"},
		{"loss parallel", []core.OpInfo{{Kind: "cross_entropy", Name: "loss_parallel_cross_entropy", In: []core.Value{logits}}}, "vocabulary-parallel"},
		{"fused linear", []core.OpInfo{{Kind: "fused_linear_cross_entropy", Name: "fused_linear_cross_entropy", In: []core.Value{logits}}}, "fused with the output projection"},
		{"mse", []core.OpInfo{{Kind: "mse_loss", Name: "mse_loss", In: []core.Value{logits, logits}}}, "not a cross-entropy"},
		{"stage without the loss", []core.OpInfo{{Kind: "add", Name: "add", In: []core.Value{logits, logits}}}, ""},
	} {
		_, got, note := trainMetricsTime(&core.Program{Values: prog.Values, Ops: c.ops}, p)
		if got != 0 {
			t.Errorf("%s: %.3f ms, want 0", c.name, 1e3*got)
		}
		if c.note == "" && note != "" || !strings.Contains(note, c.note) || c.note != "" && !strings.HasPrefix(note, "train_metrics not priced: ") {
			t.Errorf("%s: note %q, want one containing %q", c.name, note, c.note)
		}
	}
}
