package hw

// Cluster is the machines a plan runs on: Nodes of GPUsPerNode GPUs,
// with the GPU-to-GPU bandwidth inside a node (IntraGBps, NVLink) and
// between nodes (InterGBps, per GPU), GB/s per direction, and the host
// memory bandwidth of one node (HostGBps, shared by its GPUs' host-side
// work: ZeRO-Offload's CPU optimizer step). Zero bandwidths mean "take
// them from the GPU and a typical fabric" (the time model; HostGBps: the
// host of the GPU's reference system, HostRate). The zero value means: as many 8-GPU nodes as the
// layout needs.
type Cluster struct {
	Nodes, GPUsPerNode   int64
	IntraGBps, InterGBps float64
	HostGBps             float64
	// NVMeReadGBps and NVMeWriteGBps are the node's local NVMe rates
	// (ZeRO-Infinity's swap files, nvme.go); zero takes DefaultNVMe.
	NVMeReadGBps, NVMeWriteGBps float64
}

// HostRate is the node's host memory bandwidth, bytes/s: the cluster's
// HostGBps, else the host of the GPU's reference system (dev.Host), else
// DefaultHostGBps (a custom gpu()).
func (c Cluster) HostRate(dev Device) float64 {
	return c.HostGBpsFor(dev) * 1e9
}

// HostGBpsFor is HostRate in GB/s.
func (c Cluster) HostGBpsFor(dev Device) float64 {
	if c.HostGBps > 0 {
		return c.HostGBps
	}
	if g := dev.Host.GBps(); g > 0 {
		return g
	}
	return DefaultHostGBps
}

// defaultGPUsPerNode is an HGX/DGX node.
const DefaultGPUsPerNode = 8

// norm fills the node size and count of a cluster for gpus GPUs.
func (c Cluster) Norm(gpus int64) Cluster {
	if c.GPUsPerNode == 0 {
		c.GPUsPerNode = DefaultGPUsPerNode
		if gpus < c.GPUsPerNode && c.Nodes <= 1 {
			c.GPUsPerNode = max(gpus, 1)
		}
	}
	if c.Nodes == 0 {
		c.Nodes = (gpus + c.GPUsPerNode - 1) / c.GPUsPerNode
	}
	return c
}
