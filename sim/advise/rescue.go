package advise

import (
	"fmt"
	"sort"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
)

// Rescue is what would fit a plan no change rescues: the plan as given on
// a larger GPU of the catalog, or over more GPUs with its model states
// sharded.
type Rescue struct {
	GPU   *Row     // the smallest catalog GPU with more memory on which the plan fits; nil when none
	GPUs  *Row     // the fewest GPUs (a power of two times the plan's) on which it fits sharded; nil when none
	Notes []string // why one of them is missing
}

// maxScale bounds the GPU count tried: 1024 times the plan's GPUs.
const maxScale = 1024

// rescue finds the smallest GPU and the smallest GPU count for p.
func rescue(rs *replayer, p *core.Plan, base *replay.Report, budget int64) (*Rescue, error) {
	out := &Rescue{}
	// A larger card only for a plan its own GPU does not hold: more
	// memory is no answer to a budget that alone turns the plan away
	// (the rescue named the A100-80GB, 60 MiB larger than the H100-80GB
	// that held a 946.81 MiB plan, for advise(plan, budget=1)).
	if !base.Fits {
		cat := hw.Catalog()
		sort.SliceStable(cat, func(i, j int) bool { return cat[i].Memory < cat[j].Memory })
		for _, d := range cat {
			if d.Memory <= p.Device.Memory {
				continue
			}
			r, err := rs.try(p, base, one("gpu", "gpu", d))
			if err != nil {
				return nil, err
			}
			if r != nil && r.Fits {
				out.GPU = r
				break
			}
		}
		if out.GPU == nil {
			out.Notes = append(out.Notes, fmt.Sprintf("no GPU of the catalog fits it as it is (the largest: %s)", cat[len(cat)-1].Name))
		}
	}
	if p.Model.Points > 0 { // a graph model: anemoi's model sharding splits the graph itself
		return modelSharded(rs, p, base, budget, out)
	}
	par, mode := sharded(p)
	if mode == "" {
		out.Notes = append(out.Notes, "its model states cannot be sharded over more GPUs")
		return out, nil
	}
	gpus := p.Parallel.Norm().GPUs()
	for n := int64(2); n <= maxScale; n *= 2 {
		q := par
		q.DP = par.Norm().DP * n
		r, err := rs.try(p, base, moreGPUs(p, q))
		if err != nil {
			return nil, err
		}
		if r != nil && r.Fits && r.Used <= budget {
			out.GPUs = r
			return out, nil
		}
	}
	out.Notes = append(out.Notes, fmt.Sprintf("%d GPUs with %s do not fit it either: what one GPU holds of a micro-batch's activations does not shrink with more data-parallel GPUs", gpus*maxScale, mode))
	return out, nil
}

// moreGPUs is the change to layout q; a cluster of a fixed node count
// grows to as many nodes as q needs.
func moreGPUs(p *core.Plan, q core.Parallelism) Change {
	c := Change{Knob: "gpus", Settings: []Setting{{"parallel", q}}}
	if p.Cluster.Nodes > 0 {
		cl := p.Cluster
		cl.Nodes = 0
		c.Settings = append(c.Settings, Setting{"cluster", cl})
	}
	return c
}

// modelSharded finds the fewest GPUs per model of anemoi's model sharding
// (hardware.num_gpus_per_model = G: parallel(cp=G, cp_mode="ulysses"),
// sim/graph/shard.go) that fit a graph model: each GPU holds a G-th of
// the graph's rows and heads. It runs one sample per GPU, so stacked
// members run one at a time.
func modelSharded(rs *replayer, p *core.Plan, base *replay.Report, budget int64, out *Rescue) (*Rescue, error) {
	par := p.Parallel.Norm()
	for n := int64(2); n <= maxScale; n *= 2 {
		q := p.Parallel
		q.CP, q.CPMode = par.CP*n, "ulysses"
		c := moreGPUs(p, q)
		if p.Members > 1 && p.MembersMode != "sequential" && p.MembersMode != "spread" {
			c.Settings = append(c.Settings, Setting{"members_mode", "sequential"})
		}
		r, err := rs.try(p, base, c)
		if err != nil {
			return nil, err
		}
		if r == nil { // the plan refuses: say why when it refuses even two
			if n == 2 {
				out.Notes = append(out.Notes, "anemoi's model sharding does not apply: "+refusal(p, c))
				return out, nil
			}
			break
		}
		if r.Fits && r.Used <= budget {
			out.GPUs = r
			return out, nil
		}
	}
	out.Notes = append(out.Notes, "no count of GPUs per model (anemoi's model sharding, parallel(cp=G, cp_mode=\"ulysses\")) fits it")
	return out, nil
}

// sharded is p's layout with its model states sharded over the
// data-parallel GPUs: as it is when it shards already, else FSDP (ZeRO-3
// where FSDP is refused, Megatron's distributed optimizer with its
// precision).
func sharded(p *core.Plan) (core.Parallelism, string) {
	par := p.Parallel
	n := par.Norm()
	switch {
	case n.FSDP:
		return par, "fsdp"
	case n.Zero > 0:
		return par, fmt.Sprintf("zero=%d", n.Zero)
	case n.DistributedOptimizer:
		return par, "distributed_optimizer"
	case p.Precision.Megatron:
		par.DistributedOptimizer = true
		return par, "distributed_optimizer"
	}
	for _, mode := range []string{"fsdp", "zero=3"} {
		q := par
		if mode == "fsdp" {
			q.FSDP = true
		} else {
			q.Zero = 3
		}
		test := *p
		test.Parallel = q
		test.Parallel.DP = max(n.DP, 1) * 2
		if err := test.Validate(); err == nil {
			return q, mode
		}
	}
	return par, ""
}

// try replays p with change c, measured against base on the changed
// plan's GPU: nil when the plan rejects it.
func (rs *replayer) try(p *core.Plan, base *replay.Report, c Change) (*Row, error) {
	q, err := c.Apply(p)
	if err != nil {
		return nil, err
	}
	rep, err := rs.eval(q)
	if err != nil {
		if rejected(err) {
			return nil, nil
		}
		return nil, err
	}
	r := row([]Change{c}, q, rep, base, q.Device.Memory, Fit)
	return &r, nil
}

// refusal is why the plan refuses change c.
func refusal(p *core.Plan, c Change) string {
	q, err := c.Apply(p)
	if err == nil {
		err = q.Validate()
	}
	if err == nil {
		return "the plan refuses it"
	}
	return err.Error()
}
