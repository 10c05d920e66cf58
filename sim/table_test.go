package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// ngramModel is SEEDS.md story 4's model: a small transformer ("xl",
// 29,377,536 parameters: width 512, 8 blocks, vocab 8192 tied) with an
// n-gram table of heads x rowsPerHead rows of 32 added to the residual
// stream after the embedding (16 heads x 32 = 512 features).
func ngramModel(rowsPerHead int64, grad, placement string, pad bool) *core.Model {
	block := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "ln1", Dim: 512, Bias: true},
			&nn.Attention{Name: "attn", Dim: 512, Heads: 8, Impl: "flash", Causal: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "ln2", Dim: 512, Bias: true},
			&nn.MLP{Name: "mlp", Dim: 512, Hidden: 2048, Act: "gelu"},
		}}},
	}}
	return &core.Model{
		Name: "xl",
		Layers: []core.Layer{
			&nn.Embedding{Name: "embed", Rows: 8192, Dim: 512},
			&core.Residual{Layer: &replay.Table{Name: "ngram", Rows: rowsPerHead, Dim: 32, Heads: 16, Grad: grad, Placement: placement, PadRows: pad}},
			&core.Repeat{Name: "layers", Layer: block, N: 8},
			&nn.Norm{Name: "ln_f", Dim: 512, Bias: true},
		},
		Loss: "cross_entropy", Vocab: 8192, TieEmbeddings: true,
	}
}

// ngramPlan trains the model in fp32 with AdamW (foreach), batch 16 x 512,
// on an RTX 3090 whose host link is the story's measured 25 GB/s.
func ngramPlan(t *testing.T, rowsPerHead int64, grad, placement string, pad bool) *core.Plan {
	t.Helper()
	dev, err := hw.LookupDevice("RTX-3090")
	if err != nil {
		t.Fatal(err)
	}
	dev.PCIeGBps = 25
	prec, _ := core.LookupPrecision("fp32")
	rt, _ := core.LookupRuntime("cuda")
	return &core.Plan{Model: ngramModel(rowsPerHead, grad, placement, pad), Batch: 16, Seq: 512, GradAccum: 1, Members: 1,
		Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: core.Checkpoint{Mode: "none"},
		Device: dev, Phase: core.Train, Runtime: rt}
}

func evalTable(t *testing.T, p *core.Plan) (*replay.Report, replay.TableStep) {
	t.Helper()
	r, err := Evaluate(p, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tables) != 1 {
		t.Fatalf("got %d table reports, want 1", len(r.Tables))
	}
	return r, r.Tables[0]
}

const (
	xlParams    = 29_377_536               // 8192*512 + 8*(1024+4*512*512+1024+2*512*2048) + 1024
	story20     = int64(1 << 20 * 16 * 32) // 536,870,912 table parameters
	story22     = int64(1 << 22 * 16 * 32) // 2,147,483,648
	storyReads  = 16 * 512 * 16            // 131,072 rows read per step
	storyLeaves = storyReads * 32 * 4      // 16,777,216 bytes of rows (fp32)
)

// TestTableStoryFigures holds SEEDS.md story 4's figures (issue 7's "done
// when"), each hand-checked in the comments.
func TestTableStoryFigures(t *testing.T) {
	t.Run("params", func(t *testing.T) {
		m := ngramModel(1<<20, "dense", "device", true)
		if got := m.Layers[1].Params(); got != story20 {
			t.Errorf("table params = %d, want 2^20*16*32 = %d", got, story20)
		}
		if got := m.Params(); got != xlParams+story20 {
			t.Errorf("model params = %d, want %d + %d", got, xlParams, story20)
		}
	})
	t.Run("dense 2^20: 12 B/param on the card, 15 GB of AdamW traffic", func(t *testing.T) {
		r, ts := evalTable(t, ngramPlan(t, 1<<20, "dense", "device", true))
		if want := 12 * story20; ts.DeviceBytes != want { // 6,442,450,944 = 6.4 GB
			t.Errorf("table + moments on the card = %d, want 12 x %d = %d", ts.DeviceBytes, story20, want)
		}
		if want := 28 * story20; ts.OptimizerHBM != want { // 15,032,385,536 = 15.0 GB
			t.Errorf("dense AdamW traffic = %d, want 28 x %d = %d (read w, g, m, v; write w, m, v)", ts.OptimizerHBM, story20, want)
		}
		if want := 28 * (story20 + xlParams); r.Traffic.HBM != want || r.Traffic.Optimizer != want {
			t.Errorf("traffic hbm = %d, optimizer = %d, want both %d", r.Traffic.HBM, r.Traffic.Optimizer, want)
		}
		if ts.RowsRead != storyReads {
			t.Errorf("rows read = %d, want 16 x 512 x 16 = %d", ts.RowsRead, storyReads)
		}
		if !r.Fits {
			t.Errorf("dense 2^20 should fit a 24 GB card: %+v", r.OOM)
		}
		// The dense gradient is table-sized: 4 B x 537M on the card.
		if r.States.Grads < 4*story20 {
			t.Errorf("grads = %d, want at least the table's %d", r.States.Grads, 4*story20)
		}
	})
	t.Run("sparse 2^20 on the card: 12 B/param, rows-only traffic", func(t *testing.T) {
		r, ts := evalTable(t, ngramPlan(t, 1<<20, "sparse", "device", true))
		// The spare padding row adds one row per head to the storage.
		if want := int64(12 * (1<<20 + 1) * 16 * 32); ts.DeviceBytes != want { // 6,442,457,088
			t.Errorf("table + moments = %d, want %d", ts.DeviceBytes, want)
		}
		if ts.LeafRows != storyReads {
			t.Errorf("leaf rows = %d, want %d (padded to the maximum)", ts.LeafRows, storyReads)
		}
		if want := int64(28 * storyReads * 32); ts.OptimizerHBM != want { // 117,440,512
			t.Errorf("row-wise AdamW traffic = %d, want 28 x 131,072 x 32 = %d", ts.OptimizerHBM, want)
		}
		if want := 28*int64(xlParams) + 28*storyReads*32; r.Traffic.HBM != want {
			t.Errorf("traffic hbm = %d, want %d", r.Traffic.HBM, want)
		}
		if r.States.Grads != 4*xlParams {
			t.Errorf("grads = %d, want only the transformer's %d (the table has none)", r.States.Grads, 4*xlParams)
		}
		if r.TrainableParams != xlParams+story20 {
			t.Errorf("trainable = %d, want %d", r.TrainableParams, xlParams+story20)
		}
		if !r.Fits {
			t.Errorf("sparse 2^20 should fit: %+v", r.OOM)
		}
	})
	t.Run("2^22 rows does not fit a 24 GB RTX 3090", func(t *testing.T) {
		for _, grad := range []string{"dense", "sparse"} {
			r, ts := evalTable(t, ngramPlan(t, 1<<22, grad, "device", true))
			if ts.DeviceBytes < 12*story22 { // 25,769,803,776 = 26 GB
				t.Errorf("%s: table + moments = %d, want >= %d", grad, ts.DeviceBytes, 12*story22)
			}
			if r.Fits || r.OOM == nil {
				t.Errorf("%s: 2^22 rows fits a %d-byte card; want an OOM", grad, r.Capacity)
			}
		}
	})
	t.Run("host: 0 table bytes on the card, 16.8 MB each way, 1.3 ms at 25 GB/s", func(t *testing.T) {
		for _, rows := range []int64{1 << 20, 1 << 22} {
			r, ts := evalTable(t, ngramPlan(t, rows, "sparse", "host", true))
			if ts.DeviceBytes != 0 {
				t.Errorf("%d: table bytes on the card = %d, want 0", rows, ts.DeviceBytes)
			}
			if r.States.Params != 4*xlParams || r.States.Optimizer != 8*xlParams {
				t.Errorf("%d: device states params %d optimizer %d, want the transformer's alone", rows, r.States.Params, r.States.Optimizer)
			}
			if ts.PCIeEachWay != storyLeaves || r.Traffic.PCIe != storyLeaves {
				t.Errorf("%d: pcie each way = %d (report %d), want 131,072 x 32 x 4 = %d", rows, ts.PCIeEachWay, r.Traffic.PCIe, storyLeaves)
			}
			if want := 2 * float64(storyLeaves) / 25e9; math.Abs(ts.Transfer.PCIeSeconds-want) > 1e-12 { // 1.342 ms
				t.Errorf("%d: round trip = %g s, want %g", rows, ts.Transfer.PCIeSeconds, want)
			}
			host := int64(12*(rows+1)*16*32) + 2*storyLeaves // table + moments + two pinned staging buffers
			if ts.HostBytes != host || r.HostMemory != host {
				t.Errorf("%d: host bytes = %d (report %d), want %d", rows, ts.HostBytes, r.HostMemory, host)
			}
			if ts.OptimizerHBM != 0 {
				t.Errorf("%d: host table's optimizer HBM traffic = %d, want 0", rows, ts.OptimizerHBM)
			}
			if !r.Fits {
				t.Errorf("%d: host placement should fit: %+v", rows, r.OOM)
			}
		}
	})
}

// TestTableHostAccess checks the host random-access term by hand: 131,072
// rows x 4 accesses over 16 threads at 90 ns = 2.949 ms; at 2^22 rows the
// page tables (25.8 GB / 4096 x 8 = 50.3 MB) outgrow the 32 MiB cache, so
// 1 - 33,554,432 / 50,331,680 = 33.3 % of accesses take a second miss.
func TestTableHostAccess(t *testing.T) {
	for _, tc := range []struct {
		rows    int64
		miss    float64
		seconds float64
	}{
		{1 << 20, 0, 131072 * 4 * 90e-9 / 16},
		{1 << 22, 1 - 33554432.0/50331656, 131072 * 4 * 90e-9 / 16 * (2 - 33554432.0/50331656)},
	} {
		_, ts := evalTable(t, ngramPlan(t, tc.rows, "sparse", "host", true))
		h := ts.Transfer.Host
		if h.Accesses != 4*storyReads || h.Threads != 16 || h.RowBytes != 128 {
			t.Errorf("%d: accesses %d threads %d row %d", tc.rows, h.Accesses, h.Threads, h.RowBytes)
		}
		// The rows are scattered over the table and its moments (the
		// staging buffers are read sequentially).
		if want := int64(12*(tc.rows+1)*16*32) / 4096 * 8; h.PageTableBytes != want {
			t.Errorf("%d: page tables = %d, want %d", tc.rows, h.PageTableBytes, want)
		}
		if math.Abs(h.Seconds-tc.seconds) > 1e-4*tc.seconds || math.Abs(h.PageWalkMiss-tc.miss) > 1e-12 {
			t.Errorf("%d: host %g s miss %g, want %g s miss %g", tc.rows, h.Seconds, h.PageWalkMiss, tc.seconds, tc.miss)
		}
		if !strings.Contains(h.Assumption(), "scattered 128-byte row accesses") {
			t.Errorf("assumption %q", h.Assumption())
		}
	}
}

// TestTableModes covers eval, LoRA-frozen tables and several reads per head.
func TestTableModes(t *testing.T) {
	t.Run("eval on the host: rows in only, no moments", func(t *testing.T) {
		p := ngramPlan(t, 1<<20, "sparse", "host", true)
		p.Phase = core.Eval
		r, ts := evalTable(t, p)
		if want := int64(4*(1<<20+1)*16*32) + storyLeaves; ts.HostBytes != want {
			t.Errorf("host bytes = %d, want table + one staging buffer %d", ts.HostBytes, want)
		}
		if want := float64(storyLeaves) / 25e9; math.Abs(ts.Transfer.PCIeSeconds-want) > 1e-12 {
			t.Errorf("transfer = %g s, want one direction %g", ts.Transfer.PCIeSeconds, want)
		}
		if ts.Transfer.Host.Accesses != storyReads {
			t.Errorf("host accesses = %d, want one gather per row, %d", ts.Transfer.Host.Accesses, storyReads)
		}
		if r.TrainableParams != 0 || r.States.Grads != 0 {
			t.Errorf("eval: trainable %d grads %d, want 0", r.TrainableParams, r.States.Grads)
		}
	})
	t.Run("eval on the card: the table read directly", func(t *testing.T) {
		p := ngramPlan(t, 1<<20, "sparse", "device", true)
		p.Phase = core.Eval
		r, ts := evalTable(t, p)
		if want := int64(4 * (1<<20 + 1) * 16 * 32); ts.DeviceBytes != want || ts.LeafRows != 0 {
			t.Errorf("device bytes %d leaf rows %d, want %d and 0", ts.DeviceBytes, ts.LeafRows, want)
		}
		if r.Traffic.HBM != 0 {
			t.Errorf("eval hbm traffic = %d, want 0", r.Traffic.HBM)
		}
	})
	t.Run("lora freezes the table", func(t *testing.T) {
		p := ngramPlan(t, 1<<20, "sparse", "device", true)
		p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"all-linear"}}
		r, ts := evalTable(t, p)
		if ts.OptimizerHBM != 0 || ts.LeafRows != 0 || r.TrainableParams >= story20 {
			t.Errorf("frozen table: hbm %d leaf rows %d trainable %d", ts.OptimizerHBM, ts.LeafRows, r.TrainableParams)
		}
	})
	t.Run("two reads per head", func(t *testing.T) {
		p := ngramPlan(t, 1<<20, "sparse", "device", true)
		p.Model.Layers[1].(*core.Residual).Layer.(*replay.Table).ReadsPerToken = 32
		r, ts := evalTable(t, p)
		// 8,192 positions x 2 reads = 16,384 indices per head, all distinct at most.
		if ts.RowsRead != 2*storyReads || ts.LeafRows != 2*storyReads {
			t.Errorf("rows read %d leaf rows %d, want %d", ts.RowsRead, ts.LeafRows, 2*storyReads)
		}
		if !r.Fits {
			t.Errorf("does not fit: %+v", r.OOM)
		}
	})
	t.Run("no pcie figure: a note, no time", func(t *testing.T) {
		p := ngramPlan(t, 1<<20, "sparse", "host", true)
		p.Device.PCIeGBps = 0
		r, ts := evalTable(t, p)
		if ts.Transfer.PCIeSeconds != 0 || len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "pcie_gbps is 0") {
			t.Errorf("seconds %g notes %q", ts.Transfer.PCIeSeconds, r.Notes)
		}
	})
	t.Run("tensor parallelism is refused", func(t *testing.T) {
		p := ngramPlan(t, 1<<20, "sparse", "device", true)
		p.Parallel = core.Parallelism{TP: 2}
		_, err := Evaluate(p, core.Options{})
		if err == nil || !strings.Contains(err.Error(), "tables are not modelled under tensor or context parallelism yet (tp=2, cp=1)") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("a table needs token ids", func(t *testing.T) {
		m := &core.Model{Name: "x", Layers: []core.Layer{&replay.Table{Name: "t", Rows: 10, Dim: 4, Heads: 1}}, Loss: "mse", InputDim: 4}
		p := ngramPlan(t, 1, "dense", "device", true)
		p.Model = m
		_, err := Evaluate(p, core.Options{})
		if err == nil || !strings.Contains(err.Error(), "table reads the batch's token ids") {
			t.Errorf("got %v", err)
		}
	})
}
