package hw

// HostMemory is the host memory of the node a catalog GPU is usually
// installed in (its reference system: the vendor's own server where there
// is one), as the peak its DIMMs allow: Sockets x Channels per socket x
// MTps mega-transfers per second x 8 bytes per transfer. It is the default
// of cluster(host=), which prices host-side work (ZeRO-Offload's CPU
// optimizer step, torch's optimizer on FSDP2's host shards). A peak, not a
// measured rate: a CPU kernel streams less (STREAM reaches a fraction of
// it), so host-side times priced with it are lower bounds.
type HostMemory struct {
	System   string // the reference system, with its CPUs
	Sockets  int
	Channels int     // memory channels per socket
	MTps     float64 // DIMM transfer rate, MT/s
	Source   string  // where the system, its CPUs and their memory come from
}

// GBps is the host memory's peak, GB/s (1e9 B/s); 0 when unknown.
func (h HostMemory) GBps() float64 {
	return float64(h.Sockets*h.Channels) * h.MTps * 8 / 1000
}

// DefaultHostGBps is the host memory bandwidth of one node when neither
// the cluster nor the GPU gives one (a custom gpu()): a DGX H100's
// (dgxH100Host), 2 x 8 x 4800 MT/s x 8 B = 614.4 GB/s.
const DefaultHostGBps = 614.4

// The reference systems' host memory. "MLPerf" below is the system
// description JSON of an MLCommons submission, github.com/mlcommons
// repository and path as named; "ARK" is Intel's product page of the
// processor ("Max # of Memory Channels", "Memory Types").
var (
	dgx1Host = HostMemory{System: "DGX-1 with V100, 2 x Intel Xeon E5-2698 v4", Sockets: 2, Channels: 4, MTps: 2400,
		Source: "DGX-1 (V100) CPUs: 2 x Xeon E5-2600 v4, up to 0.5 TB DDR4 (AnandTech 12587, \"NVIDIA's DGX-2\", " +
			"its DGX-1 column), the 20-core E5-2698 v4 (DGX-1 datasheet, RECALLED); ARK E5-2698 v4: 4 channels, DDR4-2400 at most"}
	dgx2Host = HostMemory{System: "DGX-2, 2 x Intel Xeon Platinum 8168", Sockets: 2, Channels: 6, MTps: 2666,
		Source: "DGX-2: dual Xeon Platinum 8168 at 2.7 GHz (Wikipedia, Nvidia DGX), 1.5 TB DDR4 (AnandTech 12587); MLPerf training_results_v0.7 " +
			"NVIDIA/systems/dgx2_ngc20.06_tensorflow.json: 2 x 24-core Xeon Platinum at 2.7 GHz, 1.5 TB; ARK " +
			"Xeon Platinum 8168 (Skylake-SP): 6 channels of DDR4-2666"}
	dgxA100Host = HostMemory{System: "DGX A100, 2 x AMD EPYC 7742", Sockets: 2, Channels: 8, MTps: 3200,
		Source: "MLPerf training_results_v0.7 NVIDIA/systems/dgxa100_ngc20.06_pytorch.json: 2 x AMD EPYC " +
			"7742, 2 TB; AMD's EPYC 7742 specifications: 8 channels of DDR4-3200"}
	dgxH100Host = HostMemory{System: "DGX H100, 2 x Intel Xeon Platinum 8480C", Sockets: 2, Channels: 8, MTps: 4800,
		Source: "NVIDIA DGX H100 user guide, Hardware Overview: 2 x Xeon Platinum 8480C, 2 TB; MLPerf " +
			"inference_results_v4.1 closed/NVIDIA/systems/DGX-H100_H100-SXM-80GBx8_TRT.json: 2 x Xeon Platinum " +
			"8480C, 32 x 64 GB MTC40F2046S1RC48BA1 (Micron DDR5-4800 RDIMMs); ARK Xeon Platinum 8480+: 8 " +
			"channels of DDR5-4800"}
	dgxH200Host = HostMemory{System: "DGX H200, 2 x Intel Xeon Platinum 8480C", Sockets: 2, Channels: 8, MTps: 4800,
		Source: "NVIDIA DGX BasePOD reference architecture, Core Components: DGX H200 and H100 with dual Xeon " +
			"Platinum 8480C, 2 TB DDR5; MLPerf inference_results_v4.1 closed/NVIDIA/systems/H200-SXM-141GBx8_TRT.json: " +
			"32 x 64 GB MTC40F2046S1RC48BA1 (DDR5-4800); ARK Xeon Platinum 8480+: 8 channels of DDR5-4800"}
	dgxB200Host = HostMemory{System: "DGX B200, 2 x Intel Xeon Platinum 8570", Sockets: 2, Channels: 8, MTps: 5600,
		Source: "NVIDIA DGX B200 user guide, Introduction, Hardware Overview: 2 x Xeon 8570 with 56 cores each, " +
			"2 TB in 32 DIMMs; ARK Xeon Platinum 8570 (Emerald Rapids): 8 channels of DDR5-5600, the processor's " +
			"rated speed (32 DIMMs on 16 channels are two per channel, which may clock them lower)"}
	// pcieServerHost is NVIDIA's own 8-GPU PCIe server of its MLPerf
	// submissions; it stands in for the PCIe cards without a reference
	// system of their own.
	pcieServerHost = HostMemory{System: "NVIDIA's 8-GPU PCIe MLPerf server, a Gigabyte G482-Z54 with 2 x AMD EPYC 7742", Sockets: 2, Channels: 8, MTps: 3200,
		Source: "MLPerf inference_results_v3.1 closed/NVIDIA/systems/H100-PCIe-80GBx8_TRT.json: 2 x AMD EPYC " +
			"7742, 32 x 64 GB 36ASF8G72PZ-3G2E1 (Micron DDR4-3200 RDIMMs); AMD's EPYC 7742 specifications: 8 " +
			"channels of DDR4-3200"}
	mi300xHost = HostMemory{System: "8 x MI300X server, 2 x AMD EPYC 9374F", Sockets: 2, Channels: 12, MTps: 4800,
		Source: "MLPerf inference_results_v4.1 closed/AMD/systems/8xMI300X_2xEPYC-9374F.json: AMD's 8 x MI300X " +
			"submission, 2 x EPYC 9374F, 24 x 64 GB Micron MTC40F2046S1RC48BA1 (DDR5-4800); AMD's EPYC 9004 " +
			"(Genoa) specifications: 12 channels of DDR5-4800"}
	// Consumer and workstation cards have no reference system: a typical
	// desktop, one socket with two channels at the fastest speed its
	// generation's desktop processors are rated for.
	desktopDDR4Host = HostMemory{System: "a typical desktop, dual-channel DDR4-3200 (no reference system)", Sockets: 1, Channels: 2, MTps: 3200,
		Source: "not a reference system: a desktop of the card's generation, 2 channels of DDR4-3200 (AMD's " +
			"Ryzen 9 5950X specifications: 2 channels, DDR4-3200); a workstation or server host has more"}
	desktopDDR5Host = HostMemory{System: "a typical desktop, dual-channel DDR5-5600 (no reference system)", Sockets: 1, Channels: 2, MTps: 5600,
		Source: "not a reference system: a desktop of the card's generation, 2 channels of DDR5-5600 (ARK Core " +
			"i9-14900K: 2 channels, DDR5-5600); a workstation or server host has more"}
)
