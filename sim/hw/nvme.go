package hw

// NVMe is the local NVMe a node reads and writes ZeRO-Infinity's swap
// files on (offload(optimizer="nvme"), offload(params="nvme")), GB/s
// (1e9 B/s) per node, shared by the node's GPUs: DeepSpeed's swappers
// move data between the drives and pinned host buffers (libaio, the
// "aio" config), so the rate is the drives' to CPU memory.
type NVMe struct {
	ReadGBps, WriteGBps float64
	Source              string
}

// DefaultNVMe is the rate of every node that cluster(nvme_read=,
// nvme_write=) does not set: DeepSpeed's own measurement of four PCIe
// Gen4 SSDs in one RAID-0 volume, 1 GB transfers between NVMe and CPU
// memory with fio (libaio) and DeepSpeed's ds_io (DeepNVMe): about 10
// GB/s reads and 5 GB/s writes (DeepSpeed blogs/deepnvme/08-2024/README.md
// at edaa722, "achieving rates of 10GB/sec reads and 5GB/sec writes",
// an Azure NC96ads_A100_v4's four NVMe drives). A DGX A100's data cache is
// 15 TB of NVMe in RAID-0 (Microway's DGX A100 review), four 3.84 TB U.2
// drives (NVIDIA's DGX A100 datasheet, RECALLED), so the figure stands
// for it; a
// node with more or faster drives reads and writes faster (the same
// project's blogs/deepnvme/06-2025: 4 x Gen5 27 and 11 GB/s, 8 x Gen5 48
// and 26 GB/s; ZeRO-Infinity's own DGX-2 nodes read 28 GB/s from NVMe per
// node, the SC21 talk's slides, docs/assets/files/SC21-ZeRO-Infinity.pdf
// in the same repository: "NVMe -> GPU: 28 GB/s - 1.8 TB/s (1-64
// nodes)", no write figure): give its measured rates with
// cluster(nvme_read=, nvme_write=).
var DefaultNVMe = NVMe{ReadGBps: 10, WriteGBps: 5,
	Source: "DeepSpeed blogs/deepnvme/08-2024/README.md at edaa722: 4 x PCIe Gen4 NVMe in RAID-0, fio and ds_io between NVMe and CPU memory, 10 GB/s reads, 5 GB/s writes"}

// NVMeRates is the node's NVMe read and write rates, bytes/s: the
// cluster's figures where set, else DefaultNVMe's.
func (c Cluster) NVMeRates() (read, write float64) {
	read, write = DefaultNVMe.ReadGBps, DefaultNVMe.WriteGBps
	if c.NVMeReadGBps > 0 {
		read = c.NVMeReadGBps
	}
	if c.NVMeWriteGBps > 0 {
		write = c.NVMeWriteGBps
	}
	return read * 1e9, write * 1e9
}
