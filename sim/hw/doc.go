// Package hw describes the hardware a plan runs on: accelerators (Device:
// memory as the driver reports it, peak FLOP/s by dtype, HBM, GPU-GPU and
// host link bandwidths, the CUDA context, and the rates its kernels reach in
// published benchmarks: KernelRates), the catalog of known GPUs with a
// source for every figure, the host memory of each catalog GPU's reference
// system (HostMemory, host.go: the default host bandwidth of its node), the
// local NVMe of a node (NVMe, nvme.go: ZeRO-Infinity's swap rates), and
// clusters of nodes (Cluster).
//
// hw holds figures, not behaviour: the replay reads the memory and context,
// the time model the rates.
package hw
