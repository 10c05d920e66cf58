package core

import "testing"

// The degree accessors read each degree as Norm sets it (unset is 1)
// without Norm's copy of the layout: they equal the same formulas over
// the normalized layout, on every combination of set and unset degrees.
func TestDegreesAsNormalized(t *testing.T) {
	degrees := []int64{0, 1, 2, 4}
	n := 0
	for _, dp := range degrees {
		for _, tp := range degrees {
			for _, cp := range degrees {
				for _, ep := range degrees {
					for _, rep := range degrees {
						for _, etp := range []int64{0, 1} {
							for _, pp := range []int64{0, 2} {
								for _, shards := range []struct {
									zero        int
									fsdp, distO bool
								}{{0, false, false}, {1, false, false}, {0, true, false}, {0, false, true}} {
									p := Parallelism{DP: dp, TP: tp, PP: pp, CP: cp, EP: ep, DPReplicate: rep, ETP: etp,
										Zero: shards.zero, FSDP: shards.fsdp, DistributedOptimizer: shards.distO}
									q := p.Norm()
									etpn := q.TP
									if q.ETP > 0 {
										etpn = q.ETP
									}
									shard := q.DP * q.CP / max(q.DPReplicate, 1)
									gpus := q.DP * q.TP * q.PP * q.CP
									for _, c := range []struct {
										what      string
										got, want int64
									}{
										{"ETPn", p.ETPn(), etpn},
										{"ShardDegree", p.ShardDegree(), shard},
										{"ExpertShardDegree", p.ExpertShardDegree(), max(shard*q.TP/(q.EP*etpn), 1)},
										{"GPUs", p.GPUs(), gpus},
									} {
										if c.got != c.want {
											t.Fatalf("%+v: %s %d, over the normalized layout %d", p, c.what, c.got, c.want)
										}
									}
									active := gpus > 1 || q.EP > 1 || q.Zero > 0 || q.FSDP || q.DistributedOptimizer
									if p.Active() != active {
										t.Fatalf("%+v: Active %v, over the normalized layout %v", p, p.Active(), active)
									}
									n++
								}
							}
						}
					}
				}
			}
		}
	}
	if n < 4096 {
		t.Errorf("%d layouts", n)
	}
}
