package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The replay of table layers (table.go): what exists before the forward
// and the table's own optimizer step. Three hooks are called from the
// generic replay (run.go): setupTableStates after the optimizer state,
// setupTableRows after the batch, stepTables at the start of the optimizer
// step.

// TableStep is what one table layer costs per step (Report.Tables). Bytes
// are per GPU; traffic and times are per step.
type TableStep struct {
	Name      string
	Grad      string // dense | sparse
	Placement string // device | host
	Params    int64  // rows x heads x dim

	RowsRead int64 // row reads per step: positions x reads_per_token (all heads)
	LeafRows int64 // rows copied into the leaves this step, all heads (sparse: distinct, or padded)
	Padded   bool  // leaves padded to the maximum (pad_rows)

	DeviceBytes int64 // table storage and its optimizer state on the card (0 on the host)
	HostBytes   int64 // table, moments and pinned staging buffers in host memory

	OptimizerHBM int64 // device memory traffic of the table's optimizer step
	PCIeEachWay  int64 // host placement: rows in (H2D), and the same bytes of gradients out (D2H)

	Transfer TableTransfer // host placement: time terms for the time model
}

// TableTransfer holds the time terms of a host-placed table, for the time
// model to add to a step: PCIe transfers and the host's random accesses.
type TableTransfer struct {
	LinkGBps    float64 // host link per direction, GB/s (the gpu's pcie_gbps)
	PCIeSeconds float64 // round trip: rows in before the forward, gradients out after the backward (not overlapped)
	Host        HostAccessCost
}

// setupTableStates allocates the optimizer state of sparse tables on the
// device: two moments as large as the table (its storage, with the spare
// row), stepped row-wise by the table's own AdamW. Dense tables' state
// comes from the plan's optimizer like any parameter's.
func (r *Replay) setupTableStates() {
	prec := r.Plan.Precision
	for _, tp := range tablesOf(r.P) {
		if tp.t.grad() != "sparse" || !tp.train {
			continue
		}
		r.Rep.TrainableParams += tp.t.Params()
		if tp.t.placement() != "device" {
			continue
		}
		for h, pi := range tp.params {
			p := &r.P.Params[pi]
			for _, s := range []string{"exp_avg", "exp_avg_sq"} {
				b := prec.States.Bytes(p.Numel)
				r.allocate(Alloc{Tensor: p.Name + " " + s, Shape: p.Shape, DType: prec.States, Bytes: b,
					Why: fmt.Sprintf("row-wise AdamW state %s of table %s head %d (table-sized, resident)", s, tp.name, h), Cat: core.CatOptimizer})
				r.Rep.States.Optimizer += b
			}
		}
	}
}

// setupTableRows creates what each table needs before the forward: the
// hashed indices and, for sparse tables, each head's distinct rows,
// inverse indices and leaf (gathered on the device, or sent from the
// host). It also records the table's figures in the report.
func (r *Replay) setupTableRows() {
	for _, tp := range tablesOf(r.P) {
		r.op = tp.name + " rows"
		r.produce(tp.idx)
		ts := r.tableStep(tp)
		r.Rep.HostMemory += ts.HostBytes
		if len(tp.heads) == 0 { // dense, or eval on the device: the lookup reads the table
			r.Rep.Tables = append(r.Rep.Tables, ts)
			continue
		}
		n := tp.indicesPerHead()
		for _, hd := range tp.heads {
			r.produce(hd.inverse)
			r.produce(hd.rows)
			// torch.unique(sorted=True, return_inverse=True) on CUDA
			// (aten/src/ATen/native/cuda/UniqueCub.cu, compute_unique):
			// a sorted copy, the sort permutation, the arange it starts
			// from, inv_loc and counts (int64, n each), and cub's radix
			// sort storage (alternate key and value buffers, 2 x n int64).
			// The unique output is allocated for n and resize_()d to the
			// distinct count, which keeps the storage: hence rows holds n.
			r.release(r.allocate(Alloc{Tensor: tp.name + " unique workspace", Shape: []int64{7 * n}, DType: units.INT64, Bytes: units.INT64.Bytes(7 * n),
				Why: "torch.unique temporaries (sorted copy, permutation, arange, inv_loc, counts, radix-sort buffers)", Cat: core.CatTemporaries}))
			if tp.t.placement() == "host" {
				r.done[hd.rows] = true // the host has its own row list
				r.maybeFree(hd.rows)
			}
			r.produceTable(hd.leaf)
			if tp.train {
				r.holds[hd.leaf]++ // a leaf lives until the table's optimizer step
				r.holds[hd.rows]++
			}
		}
		r.done[tp.idx] = true // the sparse lookup reads the inverse indices instead
		r.maybeFree(tp.idx)
		r.Rep.Traffic.PCIe += ts.PCIeEachWay
		if tp.t.placement() == "host" && ts.Transfer.LinkGBps <= 0 {
			r.Rep.Notes = append(r.Rep.Notes, fmt.Sprintf("table %s: the gpu's pcie_gbps is 0, so its transfer time is not estimated (pass gpu(..., pcie_gbps=25))", tp.name))
		}
		if r.Plan.GradsPersist() && tp.train {
			r.Rep.Notes = append(r.Rep.Notes, fmt.Sprintf("table %s: with grad_accum the replay holds one micro-batch's leaves; earlier micro-batches' rows are taken as already stepped", tp.name))
		}
		if !tp.t.PadRows && tp.train {
			r.Rep.Notes = append(r.Rep.Notes, fmt.Sprintf("table %s: pad_rows=False: this step assumes the most distinct rows per head (%d); table_steps() replays steps with fewer", tp.name, tp.leafRows))
		}
		r.Rep.Tables = append(r.Rep.Tables, ts)
	}
}

// stepTables runs the row-wise AdamW of sparse tables after the backward:
// on the device it gathers each head's weight and moment rows, updates
// them and writes them back (one head at a time); on the host it brings
// the leaves' gradients back. Then the leaves, their gradients and the
// row lists are freed.
func (r *Replay) stepTables() {
	prec := r.Plan.Precision
	for _, tp := range tablesOf(r.P) {
		if len(tp.heads) == 0 || !tp.train {
			continue
		}
		r.op = tp.name + " row-wise AdamW"
		u := tp.leafRows * tp.t.Dim
		for h, hd := range tp.heads {
			if tp.t.placement() == "device" {
				// index_select of the weight, exp_avg and exp_avg_sq rows,
				// the denominator sqrt(v)+eps, then index_copy_ back.
				shape := []int64{tp.leafRows, tp.t.Dim}
				ids := []int32{
					r.allocateTable(Alloc{Tensor: fmt.Sprintf("%s.%d weight rows", tp.name, h), Shape: shape, DType: prec.Params, Bytes: prec.Params.Bytes(u), Why: "rows of the table gathered for the row-wise AdamW step", Cat: core.CatTemporaries}),
					r.allocateTable(Alloc{Tensor: fmt.Sprintf("%s.%d exp_avg rows", tp.name, h), Shape: shape, DType: prec.States, Bytes: prec.States.Bytes(u), Why: "exp_avg rows gathered for the row-wise AdamW step", Cat: core.CatTemporaries}),
					r.allocateTable(Alloc{Tensor: fmt.Sprintf("%s.%d exp_avg_sq rows", tp.name, h), Shape: shape, DType: prec.States, Bytes: prec.States.Bytes(u), Why: "exp_avg_sq rows gathered for the row-wise AdamW step", Cat: core.CatTemporaries}),
					r.allocateTable(Alloc{Tensor: fmt.Sprintf("%s.%d denominator", tp.name, h), Shape: shape, DType: prec.States, Bytes: prec.States.Bytes(u), Why: "sqrt(exp_avg_sq)+eps of the rows", Cat: core.CatTemporaries}),
				}
				for _, id := range ids {
					r.releaseTable(id)
				}
			}
			if g := r.gradT[hd.leaf]; g != none {
				r.release(g)
				r.gradT[hd.leaf] = none
			}
			r.holds[hd.leaf]--
			r.done[hd.leaf] = true
			r.maybeFreeTable(hd.leaf)
			r.holds[hd.rows]--
			r.done[hd.rows] = true
			r.maybeFree(hd.rows)
		}
		if tp.t.placement() == "device" {
			t := tableOptimizerTraffic(prec, tp.leafRows*int64(len(tp.heads))*tp.t.Dim)
			r.Rep.Traffic.HBM += t
			r.Rep.Traffic.Optimizer += t
		}
	}
}

// tableOptimizerTraffic is the HBM traffic of a row-wise AdamW step over
// n elements of rows read: read the weight rows, their gradient and both
// moment rows, write the weight and moment rows, as the engine counts a
// dense AdamW (optimizerTraffic). The gather into temporaries and the
// write-back are not counted twice.
func tableOptimizerTraffic(prec core.Precision, n int64) int64 {
	return 2*prec.Params.Bytes(n) + prec.Params.Bytes(n) + 4*prec.States.Bytes(n)
}

// tableStep computes a table's static figures for the report.
func (r *Replay) tableStep(tp *tableProg) TableStep {
	t := tp.t
	prec := r.Plan.Precision
	ts := TableStep{
		Name: tp.name, Grad: t.grad(), Placement: t.placement(), Params: t.Params(),
		RowsRead: tp.positions * t.reads(), Padded: t.grad() == "sparse" && t.PadRows,
	}
	storage := (t.Rows + t.spare()) * t.Heads * t.Dim
	moments := 2 * prec.States.Bytes(storage)
	if !tp.train {
		moments = 0
	}
	if len(tp.heads) > 0 {
		ts.LeafRows = tp.leafRows * t.Heads
	}
	switch {
	case t.placement() == "host":
		leaf := prec.Params.Bytes(ts.LeafRows * t.Dim)
		ts.HostBytes = prec.Params.Bytes(storage) + moments + leaf // rows staging
		ts.PCIeEachWay = leaf
		if tp.train {
			ts.HostBytes += leaf // gradient staging
		}
		ts.Transfer.LinkGBps = r.Plan.Device.PCIeGBps
		if ts.Transfer.LinkGBps > 0 {
			dirs := int64(1)
			if tp.train {
				dirs = 2
			}
			ts.Transfer.PCIeSeconds = float64(dirs*leaf) / (ts.Transfer.LinkGBps * 1e9)
		}
		accesses := int64(0)
		if tp.train {
			accesses = ts.LeafRows * 4 // gather to send; AdamW reads weight, exp_avg, exp_avg_sq rows
		} else {
			accesses = ts.LeafRows
		}
		ts.Transfer.Host = DefaultHostAccess().Cost(accesses, prec.Params.Bytes(t.Dim), prec.Params.Bytes(storage)+moments, t.Heads)
	case t.grad() == "sparse" && tp.train:
		ts.DeviceBytes = prec.Params.Bytes(storage) + moments
		ts.OptimizerHBM = tableOptimizerTraffic(prec, ts.LeafRows*t.Dim)
	default: // dense, or a sparse table in eval: a parameter stepped by the plan's optimizer
		ts.DeviceBytes = prec.Params.Bytes(storage)
		for _, pi := range tp.params {
			p := &r.P.Params[pi]
			if !tp.train || !p.Trainable {
				continue
			}
			if prec.HasMaster() {
				ts.DeviceBytes += prec.Master.Bytes(p.Numel)
			}
			for _, s := range r.Plan.Optimizer.States(p.Shape, p.Numel, prec.States) {
				ts.DeviceBytes += s.Bytes
			}
			ts.OptimizerHBM += r.OptimizerTraffic(p)
		}
	}
	return ts
}

// produceTable allocates a table's per-step value through the table pool
// (table_steps.go) when one is set.
func (r *Replay) produceTable(v core.Value) {
	vi := &r.P.Values[v]
	r.valT[v] = r.allocateTable(Alloc{Tensor: vi.Name, Shape: vi.Shape, DType: vi.Dtype, Bytes: vi.Bytes, Why: vi.Why, Cat: vi.Cat})
	r.done[v] = false
}

func (r *Replay) maybeFreeTable(v core.Value) {
	if r.done[v] && r.holds[v] <= 0 && r.valT[v] != none {
		r.releaseTable(r.valT[v])
		r.valT[v] = none
	}
}
