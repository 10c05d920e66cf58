// Package timing is the time model: the step time, MFU, HFU and tokens per
// second of a replayed program. Compute is a roofline per op (FLOPs
// against the device's peak for the op's dtype, bytes against HBM, with an
// efficiency per op class and its source); collectives take their bytes
// over the NVLink or network bandwidth of their process group with the
// ring's bus factor, overlapped with compute where the framework overlaps
// them; pipelines add the bubble of their schedule (pipeline.go); offload
// and host-placed tables add their PCIe transfers and host memory access.
//
// It reads a replay's figures (sim/replay) and never changes memory.
package timing
