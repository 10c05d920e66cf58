package hw

// Cluster is the machines a plan runs on: Nodes of GPUsPerNode GPUs,
// with the GPU-to-GPU bandwidth inside a node (IntraGBps, NVLink) and
// between nodes (InterGBps, per GPU), GB/s per direction. Zero bandwidths
// mean "take them from the GPU and a typical fabric" (the time model).
// The zero value means: as many 8-GPU nodes as the layout needs.
type Cluster struct {
	Nodes, GPUsPerNode   int64
	IntraGBps, InterGBps float64
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
