package replay

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// The host side of a host-placed table: each step the host gathers the
// rows read (to send them) and runs AdamW over them, touching rows
// scattered across a table and two moments of many GB. SEEDS.md story 4
// measured that this, not PCIe, is the cost: host memory streams 53 GB/s
// sequentially but far less for scattered 128-byte rows, and the cost grows
// with the table (+6 ms from 2^20 to 2^22 rows per head for the same rows
// read), because of cache and TLB misses.
//
// The model is a latency model of those misses, stated so it can be
// checked and changed:
//
//   - Each scattered row access costs one DRAM round trip (LatencyNs): a
//     row of 128 B is two adjacent cache lines in one DRAM page, fetched
//     together. Per row read the host makes 4 such accesses when training
//     (gather the row to send; AdamW reads the weight, exp_avg and
//     exp_avg_sq rows, and its writes hit the lines just read; the
//     gradient rows stream from the pinned staging buffer) and 1 in eval.
//   - Pages are 4 KiB (PyTorch's CPU allocator, c10/core/impl/alloc_cpu.cpp,
//     asks for transparent huge pages only when THP_MEM_ALLOC_ENABLE is
//     set). Scattered accesses then miss the TLB; the page walk finds the
//     page-table entry in cache while the page tables (8 B per 4 KiB page,
//     1/512 of the working set) fit in the last-level cache, and pays a
//     second DRAM round trip for the fraction that does not fit.
//   - Threads walk rows in parallel, one table per thread (the story), each
//     with one miss outstanding; a row's page walk and its data access are
//     dependent, so they do not overlap.
//   - The accesses cannot beat streaming the rows at HostGBps either.
//
// With the defaults this gives 2.95 ms per step for the story's 2^20 rows
// per head and 3.93 ms for 2^22 (+1.0 ms): the right direction, but a
// sixth of the measured +6 ms. The story's host code evidently overlaps
// misses less than one per thread (Python-level loops, NUMA, memory
// contention with the data loader); set LatencyNs or Threads to calibrate
// against a measured machine.
type HostAccessModel struct {
	LatencyNs  float64 // one DRAM random access that misses every cache, ns
	CacheBytes int64   // last-level cache that can hold page-table entries
	PageBytes  int64   // page size of the table's host memory
	Threads    int64   // threads walking rows in parallel; 0 = one per table (head)
	HostGBps   float64 // sequential host memory bandwidth, GB/s (a floor on the time)
}

// DefaultHostAccess is the model's default host: 90 ns loaded DRAM latency
// (a typical figure for DDR4 desktop and server parts under random access,
// e.g. Intel Memory Latency Checker idle latencies of 70-90 ns), a 32 MiB
// last-level cache, 4 KiB pages, one thread per table, and the story's
// measured 53 GB/s sequential bandwidth.
func DefaultHostAccess() HostAccessModel {
	return HostAccessModel{LatencyNs: 90, CacheBytes: 32 << 20, PageBytes: 4096, HostGBps: 53}
}

// HostAccessCost is the host-side random-access term of one table's step.
type HostAccessCost struct {
	Model          HostAccessModel
	Accesses       int64   // scattered row accesses per step
	RowBytes       int64   // bytes of one row
	WorkingSet     int64   // bytes the rows are scattered over (table and moments)
	PageTableBytes int64   // page-table entries covering the working set
	PageWalkMiss   float64 // fraction of accesses whose page-table entry misses the cache
	Threads        int64
	Seconds        float64
}

// Assumption states the term in one line, for reports.
func (c HostAccessCost) Assumption() string {
	return fmt.Sprintf("%d scattered %d-byte row accesses over %s, %.0f ns each (+%.0f%% page-walk misses: %s of page tables vs %s cache), %d threads",
		c.Accesses, c.RowBytes, units.FormatBytesDecimal(c.WorkingSet), c.Model.LatencyNs, 100*c.PageWalkMiss,
		units.FormatBytesDecimal(c.PageTableBytes), units.FormatBytes(c.Model.CacheBytes), c.Threads)
}

// Cost is the host time of accesses scattered row accesses of rowBytes
// over workingSet bytes, for tables tables.
func (m HostAccessModel) Cost(accesses, rowBytes, workingSet, tables int64) HostAccessCost {
	c := HostAccessCost{Model: m, Accesses: accesses, RowBytes: rowBytes, WorkingSet: workingSet, Threads: m.Threads}
	if c.Threads <= 0 {
		c.Threads = max(tables, 1)
	}
	if m.PageBytes > 0 {
		c.PageTableBytes = workingSet / m.PageBytes * 8
	}
	if c.PageTableBytes > m.CacheBytes && c.PageTableBytes > 0 {
		c.PageWalkMiss = 1 - float64(m.CacheBytes)/float64(c.PageTableBytes)
	}
	latency := float64(accesses) * m.LatencyNs * 1e-9 * (1 + c.PageWalkMiss) / float64(c.Threads)
	stream := 0.0
	if m.HostGBps > 0 {
		stream = float64(accesses*rowBytes) / (m.HostGBps * 1e9)
	}
	c.Seconds = max(latency, stream)
	return c
}
