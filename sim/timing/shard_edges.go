package timing

// edgeSeconds prices w's ShardEdges, seconds a micro-batch: the
// forward's unoverlapped gathers (the root unit's, DPO's reference
// copy's) and the backward's last reduce-scatter.
func (w *GpuWork) edgeSeconds(cc *commCtx) (root, ref, last float64) {
	e := w.ShardEdges
	if e.RootGather > 0 {
		root = cc.seconds("all_gather", "dp", e.RootGather)
	}
	if e.RefGather > 0 {
		ref = cc.seconds("all_gather", "dp", e.RefGather)
	}
	if e.RootScatter > 0 {
		last = cc.seconds("reduce_scatter", "dp", e.RootScatter)
	}
	return root, ref, last
}
