package search

// The shardings of a space's data-parallel ranks and their variants:
// HSDP's splits into replicas x shards and the offloads each sharding
// takes (space.go's enumerate lists a layout per variant).

// replicaSplits is the HSDP replica counts of dp x cp ranks: every r
// dividing dp that leaves more than one replica and more than one shard.
func replicaSplits(dp, cp int64) []int64 {
	var out []int64
	for _, r := range divisors(dp, dp) {
		if r > 1 && dp*cp/r > 1 {
			out = append(out, r)
		}
	}
	return out
}

// shardingVariant is one way to run a sharding: HSDP's replicas, and
// what it keeps on the host.
type shardingVariant struct {
	rep     int64
	offload offloadKind
}

// shardingVariants lists sharding sh's variants on dp x cp ranks: HSDP's
// every split into replicas x shards, for zero1-3 the optimizer on the
// GPU and (ZeRO-Offload) on the host, for zero3 and fsdp the
// parameters on the host, and for zero3 the optimizer on NVMe, as the
// Offload list asks.
func (sp Space) shardingVariants(sh string, dp, cp int64) []shardingVariant {
	if sh == "hsdp" {
		var out []shardingVariant
		if sp.offloadNone {
			for _, r := range replicaSplits(dp, cp) {
				out = append(out, shardingVariant{rep: r})
			}
		}
		return out
	}
	var out []shardingVariant
	if sp.offloadNone {
		out = append(out, shardingVariant{rep: 1})
	}
	if sp.offloadOptimizer && (sh == "zero1" || sh == "zero2" || sh == "zero3") {
		out = append(out, shardingVariant{rep: 1, offload: optimizerOnHost})
	}
	if sp.offloadParams && (sh == "zero3" || sh == "fsdp") {
		out = append(out, shardingVariant{rep: 1, offload: paramsOnHost})
	}
	if sp.offloadNVMe && sh == "zero3" { // FSDP offloads to CPU memory only
		out = append(out, shardingVariant{rep: 1, offload: optimizerOnNVMe})
	}
	return out
}

// anyVariantAt says whether some sharding of the Sharding list has a
// variant on dp x cp ranks (shardingVariants).
func (sp Space) anyVariantAt(dp, cp int64) bool {
	for _, sh := range sp.Sharding {
		if len(sp.shardingVariants(sh, dp, cp)) > 0 {
			return true
		}
	}
	return false
}

// anyShardingVariant says whether some sharding of the Sharding list
// runs with some offload of the Offload list (shardingVariants): else
// the space is empty whatever the degrees.
func (sp Space) anyShardingVariant() bool {
	for _, sh := range sp.Sharding {
		switch {
		case sp.offloadNone,
			sp.offloadOptimizer && (sh == "zero1" || sh == "zero2" || sh == "zero3"),
			sp.offloadParams && (sh == "zero3" || sh == "fsdp"),
			sp.offloadNVMe && sh == "zero3":
			return true
		}
	}
	return false
}
