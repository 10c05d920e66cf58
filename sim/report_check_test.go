package sim

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/replay"
)

// reportProblems lists the ways rep breaks the invariants every report
// keeps, whatever the plan: no negative byte counts; allocated <= reserved
// <= device used; the headroom is capacity minus device used; the
// breakdown's tensor categories (params ... comm, without fragmentation and
// context) add up to the peak of allocated memory; the largest single
// allocation was part of some allocated total; fits agrees with the OOM
// and the headroom; times are finite. Pipeline ranks are checked too.
func reportProblems(rep *replay.Report) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	nonNeg := map[string]int64{
		"capacity": rep.Capacity, "peak_allocated": rep.PeakAllocated, "peak_reserved": rep.PeakReserved,
		"device_used": rep.DeviceUsed, "saved_activations": rep.SavedActivations,
		"saved_weight_copies": rep.SavedWeightCopies, "host_memory": rep.HostMemory,
		"states.params": rep.States.Params, "states.grads": rep.States.Grads,
		"states.master": rep.States.Master, "states.optimizer": rep.States.Optimizer,
		"traffic.hbm": rep.Traffic.HBM, "traffic.pcie": rep.Traffic.PCIe, "traffic.nvme": rep.Traffic.NVMe,
		"traffic.network": rep.Traffic.Network, "traffic.optimizer": rep.Traffic.Optimizer,
		"largest.bytes": rep.Largest.Bytes, "params": rep.Params, "trainable_params": rep.TrainableParams,
	}
	for _, s := range rep.Breakdown {
		nonNeg["breakdown."+s.Name] = s.Bytes
	}
	for _, s := range rep.CommBytes {
		nonNeg["comm_bytes."+s.Name] = s.Bytes
	}
	for _, s := range rep.HostBreakdown {
		nonNeg["host."+s.Name] = s.Bytes
	}
	for _, o := range rep.Overheads {
		nonNeg["overhead."+o.Name] = o.Bytes
	}
	for name, v := range nonNeg {
		if v < 0 {
			bad("%s is negative (%d)", name, v)
		}
	}
	if rep.PeakAllocated > rep.PeakReserved {
		bad("peak_allocated %d > peak_reserved %d", rep.PeakAllocated, rep.PeakReserved)
	}
	if rep.PeakReserved > rep.DeviceUsed {
		bad("peak_reserved %d > device_used %d", rep.PeakReserved, rep.DeviceUsed)
	}
	if rep.Headroom != rep.Capacity-rep.DeviceUsed {
		bad("headroom %d != capacity %d - device_used %d", rep.Headroom, rep.Capacity, rep.DeviceUsed)
	}
	if want := rep.OOM == nil && rep.Headroom >= 0; rep.Fits != want {
		bad("fits %v with oom %v and headroom %d", rep.Fits, rep.OOM != nil, rep.Headroom)
	}
	var sum int64
	for _, s := range rep.Categories() {
		sum += s.Bytes
	}
	if sum != rep.PeakAllocated {
		bad("breakdown (params..comm) sums to %d, peak_allocated is %d", sum, rep.PeakAllocated)
	}
	var rows int64
	for _, s := range rep.Breakdown {
		rows += s.Bytes
	}
	if rows > rep.DeviceUsed {
		bad("the breakdown's rows sum to %d, past device_used %d", rows, rep.DeviceUsed)
	}
	if rep.Largest.Bytes > rep.PeakAllocated {
		bad("largest allocation %d > peak_allocated %d", rep.Largest.Bytes, rep.PeakAllocated)
	}
	t := rep.Time
	for name, v := range map[string]float64{"step_time": t.StepSeconds, "mfu": t.MFU, "hfu": t.HFU, "tokens_per_s": t.TokensPerS} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			bad("%s is %v", name, v)
		}
	}
	for i, r := range rep.Ranks {
		if r == rep {
			continue
		}
		for _, p := range reportProblems(r) {
			bad("rank %d: %s", i, p)
		}
	}
	return out
}
