package hw

// Cluster is the machines a plan runs on: Nodes of GPUsPerNode GPUs,
// with the GPU-to-GPU bandwidth inside a node (IntraGBps, NVLink) and
// between nodes (InterGBps, per GPU), GB/s per direction, and the host
// memory bandwidth of one node (HostGBps, shared by its GPUs' host-side
// work: ZeRO-Offload's CPU optimizer step). Zero bandwidths mean "take
// them from the GPU and a typical fabric" (the time model; HostGBps:
// DefaultHostGBps). The zero value means: as many 8-GPU nodes as the
// layout needs.
type Cluster struct {
	Nodes, GPUsPerNode   int64
	IntraGBps, InterGBps float64
	HostGBps             float64
}

// DefaultHostGBps is the host memory bandwidth of one node when the
// cluster gives none: the peak of a DGX H100's two Intel Xeon Platinum
// 8480C (NVIDIA DGX H100 User Guide, "Hardware Overview"), each with 8
// channels of DDR5-4800 (Intel ARK, Xeon Platinum 8480+: "Max # of
// Memory Channels 8", DDR5-4800): 2 x 8 x 4800 MT/s x 8 B = 614.4 GB/s.
// It is a peak, not a measured rate: a CPU kernel streams less (STREAM
// reaches a fraction of it), so host-side times priced with it are lower
// bounds; cluster(host=...) sets a measured figure.
const DefaultHostGBps = 614.4

// HostRate is the node's host memory bandwidth, bytes/s (DefaultHostGBps
// when the cluster gives none).
func (c Cluster) HostRate() float64 {
	if c.HostGBps > 0 {
		return c.HostGBps * 1e9
	}
	return DefaultHostGBps * 1e9
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
