package search

import (
	"context"
	"fmt"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
	"sort"
	"sync"
)

// Space is the layouts Run enumerates. Nil lists take defaults.
type Space struct {
	GPUs        int64 // GPUs of the job
	GPUsPerNode int64 // 0: 8
	GlobalBatch int64 // sequences per step over all replicas
	TP, PP, CP  []int64
	EP          []int64  // default: 1, and the powers of two dividing the experts of a MoE model
	Sharding    []string // ddp, zero1, zero2, zero3, fsdp, hsdp, megatron, distopt
	CPModes     []string // context parallelism for cp > 1: ring (the default), ulysses
	MicroBatch  []int64  // sequences per micro-batch; default 1, 2, 4, 8
	Checkpoint  []string // none, selective, full
	Virtual     []int64  // model chunks per GPU for pp > 1: 1 is 1F1B, more the interleaved schedule; default 1, 2, 4
	Top         int      // fitting layouts to return, fastest first; 0 = all
	Workers     int      // parallel replays; 0 = 1
	MaxLayouts  int      // refuse spaces larger than this; 0 = DefaultMaxLayouts
	// Progress, when set, is called after each replay with the replays done
	// and the most that may be needed.
	Progress func(done, total int)
}

// DefaultMaxLayouts caps a search: larger spaces are refused with a hint.
const DefaultMaxLayouts = 200_000

// Stats counts what a search did.
type Stats struct {
	Layouts      int // valid layouts enumerated
	Invalid      int // combinations the plan rejects (degrees that do not divide)
	PrunedStates int // model states alone exceed the GPU
	PrunedMemory int // model states and activations held for backward exceed the GPU
	Replayed     int // full replays
	Profiles     int // block profiles lowered
}

// Row is one layout of the result, replayed in full.
type Row struct {
	Plan     *core.Plan
	Report   *replay.Report
	Sharding string
}

// Result is the fitting layouts, fastest first.
type Result struct {
	Rows  []Row
	Stats Stats
}

// candidate is one enumerated layout.
type candidate struct {
	plan     *core.Plan
	sharding string
	key      profileKey
	est      fastEstimate
	order    int
}

// profileKey is what the lowering of a layout depends on: tensor,
// context and expert degrees, sequence parallelism, micro-batch and
// checkpointing, and the casts of the sharding (DeepSpeed and FSDP run
// mixed precision without autocast's weight copies).
type profileKey struct {
	tp, cp, ep, mbs int64
	sp, active      bool
	ulysses         bool
	ckpt, casts     string
}

// shardingLayout applies a sharding name to par.
func shardingLayout(name string, par *core.Parallelism) error {
	switch name {
	case "ddp", "megatron":
	case "zero1":
		par.Zero = 1
	case "zero2":
		par.Zero = 2
	case "zero3":
		par.Zero = 3
	case "fsdp", "hsdp": // hsdp's replicas: layout
		par.FSDP = true
	case "distopt":
		par.DistributedOptimizer = true
	default:
		return &units.Error{Path: "search", Msg: fmt.Sprintf("unknown sharding %q (known: ddp, zero1, zero2, zero3, fsdp, hsdp, megatron, distopt)", name)}
	}
	return nil
}

func powersOfTwo(limit int64) []int64 {
	var out []int64
	for n := int64(1); n <= limit; n *= 2 {
		out = append(out, n)
	}
	return out
}

// defaults fills the space's nil lists for base.
func (sp Space) defaults(base *core.Plan) (Space, error) {
	if sp.GPUs <= 0 {
		return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("gpus must be positive (got %d)", sp.GPUs)}
	}
	if sp.GPUs > core.MaxGPUs { // every layout would be refused
		return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("gpus=%d is more GPUs than memsh simulates (%d)", sp.GPUs, core.MaxGPUs)}
	}
	if sp.GlobalBatch <= 0 {
		return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("global_batch must be positive (got %d)", sp.GlobalBatch), Hint: "global_batch is the sequences per step over all data-parallel replicas"}
	}
	if sp.GPUsPerNode <= 0 {
		sp.GPUsPerNode = hw.DefaultGPUsPerNode
		if c := base.Cluster; c.GPUsPerNode > 0 {
			sp.GPUsPerNode = c.GPUsPerNode
		}
	}
	if sp.GPUs > sp.GPUsPerNode && sp.GPUs%sp.GPUsPerNode != 0 {
		return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("gpus=%d is not a whole number of %d-GPU nodes", sp.GPUs, sp.GPUsPerNode)}
	}
	if sp.TP == nil {
		sp.TP = powersOfTwo(min(sp.GPUs, 2*sp.GPUsPerNode))
	}
	_, blocks := withBlocks(base.Model, 1)
	if sp.PP == nil {
		sp.PP = []int64{1}
		for _, n := range powersOfTwo(min(sp.GPUs, blocks)) {
			if n > 1 && blocks%n == 0 {
				sp.PP = append(sp.PP, n)
			}
		}
	}
	if sp.CP == nil {
		sp.CP = []int64{1}
		if base.Model.TakesTokens() {
			sp.CP = powersOfTwo(min(8, sp.GPUs))
		}
	}
	if sp.EP == nil {
		sp.EP = []int64{1}
		if e := maxExperts(base.Model); e > 1 {
			sp.EP = powersOfTwo(min(e, sp.GPUs))
		}
	}
	if sp.Sharding == nil {
		sp.Sharding = []string{"ddp", "zero1", "zero2", "zero3"}
		if base.Precision.Name == "megatron" {
			sp.Sharding = []string{"megatron", "distopt"}
		}
	}
	if sp.CPModes == nil {
		sp.CPModes = []string{"ring"}
	}
	for _, m := range sp.CPModes {
		if m != "ring" && m != "ulysses" {
			return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("unknown cp_mode %q (known: ring, ulysses)", m)}
		}
	}
	if sp.MicroBatch == nil {
		sp.MicroBatch = []int64{1, 2, 4, 8}
	}
	if sp.Checkpoint == nil {
		sp.Checkpoint = []string{"none", "selective", "full"}
	}
	if sp.Virtual == nil {
		sp.Virtual = []int64{1, 2, 4}
	}
	if sp.MaxLayouts <= 0 {
		sp.MaxLayouts = DefaultMaxLayouts
	}
	if sp.Workers <= 0 {
		sp.Workers = 1
	}
	for _, l := range [][]int64{sp.TP, sp.PP, sp.CP, sp.EP, sp.MicroBatch, sp.Virtual} {
		for _, n := range l {
			if n <= 0 {
				return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("degrees and sizes must be positive (got %d)", n)}
			}
		}
	}
	return sp, nil
}

func maxExperts(m *core.Model) int64 {
	var e int64
	for _, l := range m.Layers {
		core.Walk(l, core.ChildPath("", nil, l), func(_ string, l core.Layer) {
			if x, ok := l.(*nn.MoE); ok {
				e = max(e, x.Experts)
			}
		})
	}
	return e
}

// enumerate lists the valid layouts of the space, in a fixed order.
func (sp Space) enumerate(base *core.Plan, stats *Stats) ([]*candidate, error) {
	var out []*candidate
	type validKey struct {
		par    string // the layout as parallel() writes it (Parallelism holds lists)
		ck     string
		mbs, m int64
	}
	valid := map[validKey]error{} // plan checks, shared by layouts that differ in nothing they read
	combos := 0
	blocks := int64(0) // the repeated blocks pipeline stages split
	if split, err := core.SplitStages(base.Model, core.Parallelism{}); err == nil {
		blocks = int64(len(split.Blocks))
	}
	for _, tp := range sp.TP {
		for _, cp := range sp.CP {
			for _, pp := range sp.PP {
				if sp.GPUs%(tp*cp*pp) != 0 {
					continue
				}
				dp := sp.GPUs / (tp * cp * pp)
				if sp.GlobalBatch%dp != 0 {
					continue
				}
				perReplica := sp.GlobalBatch / dp
				for _, ep := range sp.EP {
					for _, mode := range cpModes(sp.CPModes, cp) {
						for _, sh := range sp.Sharding {
							for _, v := range sp.Virtual {
								if pp == 1 && v > 1 {
									continue
								}
								for _, mbs := range sp.MicroBatch {
									if perReplica%mbs != 0 {
										continue
									}
									m := perReplica / mbs
									for _, ck := range sp.Checkpoint {
										combos++
										if combos > sp.MaxLayouts {
											return nil, &units.Error{Path: "search", Msg: fmt.Sprintf("the search space has more than %d layouts", sp.MaxLayouts),
												Hint: "narrow it: pass lists for tp=, pp=, cp=, micro_batch=, checkpoint= or sharding=, or raise max_layouts="}
										}
										slots := pp > 1 && blocks > 0 && blocks%(pp*v) != 0 && (blocks+2)%(pp*v) == 0
										c, err := sp.layout(base, tp, pp, cp, ep, dp, v, mbs, m, sh, ck, mode, slots)
										if err != nil {
											return nil, err
										}
										if c == nil { // hsdp where it would not replicate
											continue
										}
										k := validKey{c.plan.Parallel.String(), ck, mbs, m}
										err, seen := valid[k]
										if !seen {
											err = c.plan.Validate()
											valid[k] = err
										}
										if err != nil {
											stats.Invalid++
											continue
										}
										c.order = len(out)
										out = append(out, c)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out, nil
}

// cpModes is the context-parallel modes to try at degree cp.
func cpModes(modes []string, cp int64) []string {
	if cp == 1 {
		return []string{"ring"}
	}
	return modes
}

// layout builds one candidate plan from base: a pipeline whose chunks do
// not divide the blocks counts the embedding and the loss as one block
// each when that makes them divide (Megatron's account_for_embedding and
// account_for_loss, slots), Ulysses runs context parallelism when mode
// says so, and hsdp replicates FSDP across nodes, sharding over the ranks
// of the dp x cp group inside one (nil when that is all of them).
func (sp Space) layout(base *core.Plan, tp, pp, cp, ep, dp, v, mbs, m int64, sh, ck, mode string, slots bool) (*candidate, error) {
	par := core.Parallelism{DP: dp, TP: tp, PP: pp, CP: cp, EP: ep, SequenceParallel: tp > 1, EmbeddingSlot: slots, LossSlot: slots}
	if v > 1 {
		par.Schedule, par.VirtualStages = "interleaved", v
	}
	if mode == "ulysses" {
		par.CPMode = mode
	}
	if err := shardingLayout(sh, &par); err != nil {
		return nil, err
	}
	if sh == "hsdp" {
		inNode := max(min(sp.GPUsPerNode, sp.GPUs)/tp, 1) // dp x cp ranks of one node (tp fastest, then cp, dp)
		shard := min(dp*cp, inNode)
		r := dp * cp / shard
		if r <= 1 || (dp*cp)%shard != 0 || dp%r != 0 {
			return nil, nil
		}
		par.DPReplicate = r
	}
	c, err := core.ParseCheckpoint(ck)
	if err != nil {
		return nil, &units.Error{Path: "search", Msg: err.Error()}
	}
	p := *base
	p.Parallel, p.Batch, p.GradAccum, p.Checkpoint = par, mbs, m, c
	gpn := min(sp.GPUsPerNode, sp.GPUs)
	p.Cluster = hw.Cluster{Nodes: sp.GPUs / gpn, GPUsPerNode: gpn, IntraGBps: base.Cluster.IntraGBps, InterGBps: base.Cluster.InterGBps}
	casts := ""
	switch {
	case par.FSDP && p.Precision.Autocast:
		casts = "fsdp"
	case par.Zero > 0 && p.Precision.Autocast:
		casts = "deepspeed"
	}
	return &candidate{plan: &p, sharding: sh,
		key: profileKey{tp: tp, cp: cp, ep: ep, mbs: mbs, sp: par.SequenceParallel, active: par.Active(), ulysses: par.CPMode == "ulysses", ckpt: ck, casts: casts}}, nil
}

// Run runs the search of sp over base's model, precision, optimizer,
// sequence length and GPU. ctx cancels it.
func Run(ctx context.Context, base *core.Plan, sp Space) (*Result, error) {
	if err := fastPathSupported(base); err != nil {
		return nil, err
	}
	sp, err := sp.defaults(base)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	cands, err := sp.enumerate(base, &res.Stats)
	if err != nil {
		return nil, err
	}
	res.Stats.Layouts = len(cands)
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// Profiles, one per lowering configuration, in parallel.
	profiles := map[profileKey]*profile{}
	var keys []profileKey
	first := map[profileKey]*candidate{}
	for _, c := range cands {
		if _, ok := first[c.key]; !ok {
			first[c.key] = c
			keys = append(keys, c.key)
		}
	}
	prs := make([]*profile, len(keys))
	errs := make([]error, len(keys))
	parallelFor(ctx, sp.Workers, len(keys), func(i int) {
		prs[i], errs[i] = newProfile(first[keys[i]].plan)
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, k := range keys {
		if errs[i] != nil {
			return nil, errs[i]
		}
		profiles[k] = prs[i]
	}
	res.Stats.Profiles = len(keys)

	// The units of each pipeline shape, then the estimates and the memory
	// bound.
	type shapeKey struct {
		key   profileKey
		pp, v int64
		slots bool
	}
	shapes := map[shapeKey]*stageShape{}
	var skeys []shapeKey
	for _, c := range cands {
		par := c.plan.Parallel.Norm()
		k := shapeKey{c.key, par.PP, par.VirtualStages, par.EmbeddingSlot}
		if _, ok := shapes[k]; !ok {
			shapes[k] = nil
			skeys = append(skeys, k)
		}
	}
	shs := make([]*stageShape, len(skeys))
	parallelFor(ctx, sp.Workers, len(skeys), func(i int) {
		k := skeys[i]
		shs[i] = profiles[k.key].shape(k.pp, k.v, k.slots)
	})
	for i, k := range skeys {
		shapes[k] = shs[i]
	}
	// NCCL's buffers depend on the degrees only.
	type degrees struct {
		dp, tp, pp, cp, ep, rep int64
		active, ulysses         bool
	}
	nonTorch := map[degrees]int64{}
	degreesOf := func(c *candidate) degrees {
		par := c.plan.Parallel.Norm()
		return degrees{par.DP, par.TP, par.PP, par.CP, par.EP, par.DPReplicate, par.Active(), par.CPMode == "ulysses"}
	}
	for _, c := range cands {
		if d := degreesOf(c); nonTorch[d] == 0 {
			nonTorch[d] = nonTorchBytes(c.plan)
		}
	}
	parallelFor(ctx, sp.Workers, len(cands), func(i int) {
		c := cands[i]
		par := c.plan.Parallel.Norm()
		c.est = profiles[c.key].estimate(c.plan, shapes[shapeKey{c.key, par.PP, par.VirtualStages, par.EmbeddingSlot}], nonTorch[degreesOf(c)])
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	kept := cands[:0]
	for _, c := range cands {
		switch capacity := c.plan.Device.Memory; {
		case c.est.minStates > capacity:
			res.Stats.PrunedStates++
		case c.est.minDevice > capacity:
			res.Stats.PrunedMemory++
		default:
			kept = append(kept, c)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].est.time.StepSeconds < kept[j].est.time.StepSeconds })

	// Replays in order of estimated time, a wave of workers at a time,
	// until enough layouts fit.
	want := sp.Top
	if want <= 0 {
		want = len(kept)
	}
	reports := make([]*replay.Report, len(kept))
	rerrs := make([]error, len(kept))
	fitting, done := 0, 0
	for done < len(kept) && fitting < want {
		// Waves as large as the layouts still wanted (not the workers),
		// so that the result and its counts do not depend on the machine.
		n := min(len(kept)-done, max(want-fitting, 1))
		wave := kept[done : done+n]
		parallelFor(ctx, sp.Workers, n, func(i int) {
			reports[done+i], rerrs[done+i] = sim.Evaluate(wave[i].plan, core.Options{Context: ctx})
		})
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := done; i < done+n; i++ {
			if rerrs[i] != nil {
				return nil, rerrs[i]
			}
			res.Stats.Replayed++
			if reports[i].Fits && fitting < want {
				fitting++
				res.Rows = append(res.Rows, Row{Plan: kept[i].plan, Report: reports[i], Sharding: kept[i].sharding})
			}
		}
		done += n
		if sp.Progress != nil {
			sp.Progress(done, min(len(kept), done+want-fitting))
		}
	}
	sort.SliceStable(res.Rows, func(i, j int) bool {
		return res.Rows[i].Report.Time.StepSeconds < res.Rows[j].Report.Time.StepSeconds
	})
	return res, nil
}

// fastPathSupported refuses plans whose features the block profiles do not
// sum (search is for layouts of plain training steps).
func fastPathSupported(p *core.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	switch {
	case p.Phase == core.Eval:
		return &units.Error{Path: "search", Msg: "search ranks training steps (phase=\"eval\" given)"}
	case p.LoRA != nil || p.Quant != "" || len(p.Freeze) > 0:
		return &units.Error{Path: "search", Msg: "search does not take LoRA, quantized or frozen plans", Hint: "sweep(plan, ...) evaluates any plan"}
	case p.Offload != nil:
		return &units.Error{Path: "search", Msg: "search does not take offload", Hint: "sweep(plan, ...) evaluates any plan"}
	case p.Members > 1 || p.LossChunks > 1 || p.TokensPerBatch > 0:
		return &units.Error{Path: "search", Msg: "search does not take members, loss_chunks or tokens_per_batch", Hint: "sweep(plan, ...) evaluates any plan"}
	}
	var tables bool
	for _, l := range p.Model.Layers {
		core.Walk(l, core.ChildPath("", nil, l), func(_ string, l core.Layer) {
			if _, ok := l.(*replay.Table); ok {
				tables = true
			}
		})
	}
	if tables {
		return &units.Error{Path: "search", Msg: "search does not take models with table() layers", Hint: "sweep(plan, ...) evaluates any plan"}
	}
	return nil
}

// parallelFor runs fn(0..n-1) on workers goroutines; it stops handing
// out work when ctx is done.
func parallelFor(ctx context.Context, workers, n int, fn func(i int)) {
	if workers <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			if ctx.Err() != nil {
				return
			}
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}
