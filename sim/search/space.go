package search

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// Space is the layouts Run enumerates. Nil lists take the whole space:
// every factorisation of the GPUs into data, tensor, pipeline, context
// and expert parallelism, every micro-batch, every split of the blocks
// into pipeline chunks, every checkpoint policy and sharding. A list
// narrows its dimension to the values it gives.
type Space struct {
	GPUs        int64 // GPUs of the job
	GPUsPerNode int64 // 0: the base plan's cluster, else 8
	GlobalBatch int64 // sequences per step over all replicas
	// TP: default every divisor of the GPUs up to the model's attention
	// heads (a tensor-parallel degree above them has no head to split).
	TP []int64
	// PP: default every divisor of the GPUs up to the repeated blocks.
	PP []int64
	// CP: default every divisor of the GPUs for a token model (the plan
	// rejects those that do not divide the sequence), 1 otherwise.
	CP []int64
	// EP: default 1 and every divisor of a MoE's experts.
	EP []int64
	// ExpertTP: the experts' tensor-parallel degrees (parallel(expert_tp=)):
	// 1 keeps each expert whole on every tensor-parallel rank, tp splits
	// it like the dense layers. Default for a MoE: both at every tp > 1
	// (core.Parallelism.ETP must be 1 or tp); a list keeps the layouts
	// whose experts' degree it holds. A model without experts has no
	// choice to make: the list must be nil.
	ExpertTP []int64
	// Sharding: ddp, zero1, zero2, zero3, fsdp, hsdp (every split of the
	// dp x cp ranks into replicas x shards), megatron, distopt. Default:
	// all but the last two, or those two with Megatron's precision.
	Sharding []string
	// CPModes: context parallelism for cp > 1: ring, ulysses, allgather
	// (torch's context_parallel(), torchtitan's default). Default ring and
	// ulysses: allgather moves the ring's bytes, hidden under attention as
	// the ring's are, so it is never faster, and allocates every rank's
	// keys and values at once and the fp32 merges (TestSearchAllGatherCP).
	CPModes []string
	// MicroBatch: sequences per micro-batch; default every divisor of the
	// sequences a replica runs per step.
	MicroBatch []int64
	Checkpoint []string // default none, selective, op, full
	// Offload: "none", and "optimizer", ZeRO-Offload
	// (offload(optimizer="cpu")) for the zero1, zero2 and zero3 layouts:
	// DeepSpeed's offload_optimizer runs with ZeRO stages 1-3 only; and
	// "params", everything off the GPU that can go to the CPU, for the
	// zero3 and fsdp layouts: offload(optimizer="cpu", params="cpu") at
	// zero3 (DeepSpeed's offload_param needs stage 3 and moves the 16-bit
	// partitions only; its optimizer stays on the GPU without
	// offload_optimizer, so both are set), offload(params="cpu") with fsdp
	// (FSDP2's CPUOffloadPolicy moves the shards, gradients and optimizer
	// state together: core.Plan's validateShardedOffload). Default
	// none alone: an offloaded layout is not faster in practice (its PCIe
	// copies and the CPU's Adam step, timing/cpu_optimizer.go, replace the
	// GPU's optimizer step), so it adds layouts the user asks for when
	// memory, not time, is the question. "nvme" adds ZeRO-Infinity to the
	// zero3 layouts: offload(optimizer="nvme", params="cpu"), DeepSpeed's
	// offload_optimizer on NVMe (stage 3 only: core.Plan's
	// validateShardedOffload) with offload_param on the host. The
	// optimizer state is the host's largest share (fp32 master, moments
	// and gradient partition against the 16-bit partition); parameters on
	// NVMe keep max_in_cpu (1e9) elements per group pinned on the host
	// anyway and add the parameter swapper's pinned buffers
	// (replay/offload_nvme.go), so for most partitions they need more host
	// memory, not less (testdata/scripts/run_advise_host_nvme.txtar: 21.01
	// GiB per GPU with the parameters on the host, 35.71 GiB with both on
	// NVMe), and every gather would wait for their reads.
	Offload []string
	// Virtual: model chunks per GPU for pp > 1 (1 is 1F1B, more the
	// interleaved schedule); default every count whose chunks split the
	// blocks evenly, or evenly once the embedding and the loss count as a
	// block each (Megatron's slots). A pp whose single chunk splits the
	// blocks neither way takes torchtitan's uneven split.
	Virtual    []int64
	Top        int // fitting layouts to return, fastest first; 0 = all
	Workers    int // parallel replays; 0 = 1
	MaxLayouts int // refuse spaces larger than this; 0 = DefaultMaxLayouts
	// Progress, when set, is called as the search goes with the work done
	// and the most that may be needed: first the layouts checked and
	// estimated, then the replays.
	Progress func(done, total int)
	// eager times every layout the bounds keep before the walk (the
	// walk without lower bounds of the step time), for tests.
	eager bool
	// priceAll prices every profile, those whose layouts the memory
	// bound prunes all of too (Run prices the others alone), for tests.
	priceAll bool
	// offloadNone, offloadOptimizer, offloadParams and offloadNVMe are
	// the Offload list read by defaults; optimizerCPU, paramsCPU (fsdp),
	// zeroParamsCPU (zero3) and zeroInfinity (zero3) are the offloads the
	// offloaded layouts' plans point to (never written).
	offloadNone, offloadOptimizer, offloadParams, offloadNVMe bool
	optimizerCPU, paramsCPU, zeroParamsCPU, zeroInfinity      *core.Offload
	// carried is the base plan's layout less the axes, which every
	// layout keeps; fsdpOptions its FSDP options, which the fsdp and
	// hsdp layouts keep (space_base.go). Set by defaults.
	carried, fsdpOptions core.Parallelism
	// ckpts is Checkpoint parsed, by defaults: every layout's plan
	// shares its entry (the op policy's save list is read, never
	// written) rather than parsing it, and allocating that list, at
	// each of the several plans a layout's checks and bounds make.
	ckpts []core.Checkpoint
}

// DefaultMaxLayouts caps a search: larger spaces are refused with a hint.
const DefaultMaxLayouts = 2_000_000

// splitKind is how a pipeline's chunks split the blocks.
type splitKind uint8

const (
	splitEven   splitKind = iota // blocks / chunks each
	splitSlots                   // Megatron's account_for_embedding and account_for_loss
	splitUneven                  // torchtitan's split: the middle chunks take the remainder
)

// layout is one point of the space, compact: Run holds millions.
type layout struct {
	tp, pp, cp, ep, dp, rep, v, mbs, m int64
	sharding, ckpt                     int // indexes into Space.Sharding and Space.Checkpoint
	cpMode                             cpMode
	split                              splitKind
	wholeExperts                       bool // expert_tp=1 with tp > 1 (else the experts split with tp)
	offload                            offloadKind
}

// offloadKind is what a layout keeps on the host.
type offloadKind uint8

const (
	onGPU           offloadKind = iota
	optimizerOnHost             // ZeRO-Offload: offload(optimizer="cpu")
	paramsOnHost                // ZeRO-3's offload_param with offload_optimizer, FSDP's CPU offload
	optimizerOnNVMe             // ZeRO-Infinity: offload(optimizer="nvme", params="cpu") at zero3
)

// timedByReplay says whether a layout keeping k off the GPU is timed by
// its full replay: the block profiles do not sum the PCIe copies of every
// gather of its host-held shards (replay/fsdp_offload.go,
// shard_offload.go) nor its NVMe swaps (replay/offload_nvme.go,
// timing/nvme.go).
func (k offloadKind) timedByReplay() bool {
	return k == paramsOnHost || k == optimizerOnNVMe
}

// cpMode is how a layout runs context parallelism (core.Parallelism's
// CPMode), compact.
type cpMode uint8

const (
	cpRing cpMode = iota
	cpUlysses
	cpAllGather
)

// parseCPMode reads a cp_mode name.
func parseCPMode(name string) (cpMode, bool) {
	switch name {
	case "ring":
		return cpRing, true
	case "ulysses":
		return cpUlysses, true
	case "allgather":
		return cpAllGather, true
	}
	return cpRing, false
}

// parallel is the mode as core.Parallelism spells it ("" is the ring).
func (m cpMode) parallel() string {
	switch m {
	case cpUlysses:
		return "ulysses"
	case cpAllGather:
		return "allgather"
	}
	return ""
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

// divisors returns the divisors of n up to limit, ascending.
func divisors(n, limit int64) []int64 {
	var out []int64
	for d := int64(1); d <= n && d <= limit; d++ {
		if n%d == 0 {
			out = append(out, d)
		}
	}
	return out
}

// defaults fills the space's nil lists for base.
func (sp Space) defaults(base *core.Plan) (Space, error) {
	if err := sp.checkLists(); err != nil {
		return sp, err
	}
	if err := sp.checkIdleLists(); err != nil {
		return sp, err
	}
	if err := sp.checkEP(base); err != nil {
		return sp, err
	}
	if sp.GPUs <= 0 {
		return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("gpus must be positive (got %d)", sp.GPUs)}
	}
	if sp.GPUs > core.MaxGPUs { // every layout would be refused
		return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("gpus=%d is more GPUs than memsh simulates (%d)", sp.GPUs, core.MaxGPUs)}
	}
	if err := checkBase(base); err != nil {
		return sp, err
	}
	sp.carried, sp.fsdpOptions = carriedLayout(base.Parallel)
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
		limit := maxHeads(base.Model)
		if limit == 0 {
			limit = 2 * sp.GPUsPerNode
		}
		sp.TP = divisors(sp.GPUs, limit)
	}
	blocks := blockCount(base.Model)
	if sp.PP == nil {
		sp.PP = divisors(sp.GPUs, max(blocks, 1))
	}
	if sp.CP == nil {
		sp.CP = []int64{1}
		if base.Model.TakesTokens() {
			sp.CP = divisors(sp.GPUs, base.Seq)
		}
	}
	if sp.EP == nil {
		sp.EP = []int64{1}
		if e := maxExperts(base.Model); e > 1 {
			sp.EP = divisors(e, sp.GPUs)
		}
	}
	if err := sp.checkExpertTP(base); err != nil {
		return sp, err
	}
	if sp.Sharding == nil {
		sp.Sharding = []string{"ddp", "zero1", "zero2", "zero3", "fsdp", "hsdp"}
		if base.Precision.Megatron {
			sp.Sharding = []string{"megatron", "distopt"}
		}
	}
	for _, s := range sp.Sharding {
		if err := shardingLayout(s, &core.Parallelism{}); err != nil {
			return sp, err
		}
	}
	if sp.CPModes == nil {
		sp.CPModes = []string{"ring", "ulysses"}
	}
	if sp.Offload == nil {
		sp.Offload = []string{"none"}
	}
	for _, o := range sp.Offload {
		switch o {
		case "none":
		case "optimizer":
			sp.offloadOptimizer = true
		case "params":
			sp.offloadParams = true
		case "nvme":
			sp.offloadNVMe = true
		default:
			return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("unknown offload %q (known: none, optimizer, params, nvme)", o),
				Hint: "offload=[\"none\", \"optimizer\"] adds ZeRO-Offload (offload(optimizer=\"cpu\")) to the zero1-3 layouts, \"params\" offload(optimizer=\"cpu\", params=\"cpu\") to the zero3 layouts and offload(params=\"cpu\") to the fsdp ones, \"nvme\" ZeRO-Infinity (offload(optimizer=\"nvme\", params=\"cpu\")) to the zero3 layouts"}
		}
		if o == "none" {
			sp.offloadNone = true
		}
	}
	if base.Offload != nil && (sp.offloadOptimizer || sp.offloadParams || sp.offloadNVMe) { // activations: checkBase refuses the rest
		return sp, &units.Error{Path: "search", Msg: "the plan offloads its activations: the search's offload= cannot add the optimizer or parameters to it",
			Hint: "offload=[\"none\"] (the default) searches the plan's layouts with its activations on the host"}
	}
	if !sp.anyShardingVariant() {
		return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("offload=%s adds layouts to no sharding of sharding=%s", starList(sp.Offload), starList(sp.Sharding)),
			Hint: "\"optimizer\" offloads the zero1, zero2 and zero3 layouts, \"params\" the zero3 and fsdp ones, \"nvme\" (ZeRO-Infinity, DeepSpeed's stage 3 only) the zero3 ones; \"none\" keeps every sharding on the GPU"}
	}
	sp.optimizerCPU, sp.paramsCPU = &core.Offload{Optimizer: "cpu"}, &core.Offload{Params: "cpu"}
	sp.zeroParamsCPU = &core.Offload{Optimizer: "cpu", Params: "cpu"}
	sp.zeroInfinity = &core.Offload{Optimizer: "nvme", Params: "cpu"}
	for _, m := range sp.CPModes {
		if _, ok := parseCPMode(m); !ok {
			return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("unknown cp_mode %q (known: ring, ulysses, allgather)", m)}
		}
	}
	if sp.Checkpoint == nil {
		sp.Checkpoint = []string{"none", "selective", "op", "full"}
	}
	sp.ckpts = make([]core.Checkpoint, len(sp.Checkpoint))
	for i, ck := range sp.Checkpoint {
		c, err := core.ParseCheckpoint(ck)
		if err != nil {
			return sp, &units.Error{Path: "search", Msg: err.Error()}
		}
		sp.ckpts[i] = c
	}
	if sp.MaxLayouts <= 0 {
		sp.MaxLayouts = DefaultMaxLayouts
	}
	if sp.Workers <= 0 {
		sp.Workers = 1
	}
	for _, l := range [][]int64{sp.TP, sp.PP, sp.CP, sp.EP, sp.ExpertTP, sp.MicroBatch, sp.Virtual} {
		for _, n := range l {
			if n <= 0 {
				return sp, &units.Error{Path: "search", Msg: fmt.Sprintf("degrees and sizes must be positive (got %d)", n)}
			}
		}
	}
	return sp, nil
}

// maxHeads is the most attention heads of any attention layer of m.
func maxHeads(m *core.Model) int64 {
	var h int64
	walkModel(m, func(l core.Layer) {
		if a, ok := l.(*nn.Attention); ok {
			h = max(h, a.Heads)
		}
	})
	return h
}

// chunking is one way to split n blocks over pp stages.
type chunking struct {
	v     int64
	split splitKind
}

// chunkings lists the splits of n blocks over pp stages the space allows:
// every v whose pp x v chunks split the blocks evenly, or evenly with the
// embedding's and the loss's slots (leaving every chunk a block), and for
// a pp neither splits with one chunk, torchtitan's uneven split.
func (sp Space) chunkings(n, pp int64) []chunking {
	if pp == 1 {
		return []chunking{{1, splitEven}}
	}
	allowed := func(v int64) bool {
		if sp.Virtual == nil {
			return true
		}
		for _, x := range sp.Virtual {
			if x == v {
				return true
			}
		}
		return false
	}
	var out []chunking
	for v := int64(1); pp*v <= n+2; v++ {
		if !allowed(v) {
			continue
		}
		switch c := pp * v; {
		case n%c == 0:
			out = append(out, chunking{v, splitEven})
		case (n+2)%c == 0 && (n+2)/c >= 2:
			out = append(out, chunking{v, splitSlots})
		case v == 1 && pp <= n:
			out = append(out, chunking{1, splitUneven})
		}
	}
	return out
}

// enumerate lists the layouts of the space in a fixed order, before the
// plan checks them, and the combinations of degrees it passed over
// without a layout, by cause (spaceGaps). It refuses a space larger than
// MaxLayouts.
func (sp Space) enumerate(base *core.Plan) ([]layout, []Reason, error) {
	var out []layout
	n := int64(0) // the repeated blocks pipeline stages split
	if split, err := core.SplitStages(base.Model, core.Parallelism{}); err == nil {
		n = int64(len(split.Blocks))
	}
	tooMany := &units.Error{Path: "search", Msg: fmt.Sprintf("the search space has more than %d layouts", sp.MaxLayouts),
		Hint: "narrow it: pass lists for tp=, pp=, cp=, micro_batch=, checkpoint= or sharding=, or raise max_layouts="}
	mbsOf := func(perReplica int64) []int64 {
		if sp.MicroBatch == nil {
			return divisors(perReplica, perReplica)
		}
		var out []int64
		for _, b := range sp.MicroBatch {
			if perReplica%b == 0 {
				out = append(out, b)
			}
		}
		return out
	}
	moe := HasExperts(base.Model)
	// Two passes: the first counts the layouts, the second lists them in
	// a list of that length (appended one at a time, the 70B search's
	// list of 112,880 grew by copies: nine tenths of enumerate's time,
	// all of it on the search's one goroutine).
	count := 0
	var gaps spaceGaps // counted in the first pass
	for pass := range 2 {
		if pass == 1 {
			out = make([]layout, 0, count)
		}
		for _, tp := range sp.TP {
			var experts []expertLayout // ep and expert_tp at this tp
			for _, ep := range sp.EP {
				for _, whole := range sp.expertChoices(moe, tp) {
					experts = append(experts, expertLayout{ep, whole})
				}
			}
			for _, cp := range sp.CP {
				for _, pp := range sp.PP {
					first := pass == 0
					if sp.GPUs%(tp*cp*pp) != 0 {
						if first {
							gaps.gpus.add(tp * cp * pp)
						}
						continue
					}
					if pp > 1 && n == 0 {
						if first {
							gaps.noBlocks.add(pp)
						}
						continue
					}
					dp := sp.GPUs / (tp * cp * pp)
					if sp.GlobalBatch%dp != 0 {
						if first {
							gaps.batch.add(dp)
						}
						continue
					}
					mbss := mbsOf(sp.GlobalBatch / dp)
					chunks := sp.chunkings(n, pp)
					if first {
						switch {
						case len(mbss) == 0:
							gaps.micro.add(sp.GlobalBatch / dp)
						case len(chunks) == 0:
							gaps.stages.add(pp)
						case len(experts) == 0:
							gaps.experts.add(tp)
						case !sp.anyVariantAt(dp, cp):
							gaps.sharding.add(dp)
						}
					}
					for _, ex := range experts {
						for _, mode := range cpModes(sp.CPModes, cp) {
							for si, sh := range sp.Sharding {
								for _, sv := range sp.shardingVariants(sh, dp, cp) {
									if pass == 0 {
										if count += len(chunks) * len(mbss) * len(sp.Checkpoint); count > sp.MaxLayouts {
											return nil, nil, tooMany
										}
										continue
									}
									for _, ch := range chunks {
										for _, mbs := range mbss {
											for ci := range sp.Checkpoint {
												out = append(out, layout{tp: tp, pp: pp, cp: cp, ep: ex.ep, dp: dp, rep: sv.rep, v: ch.v,
													mbs: mbs, m: sp.GlobalBatch / dp / mbs, sharding: si, ckpt: ci, cpMode: mode, split: ch.split,
													wholeExperts: ex.whole, offload: sv.offload})
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out, gaps.reasons(sp), nil
}

// starList writes names as a Starlark list of strings.
func starList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// cpModes is the context-parallel modes to try at degree cp (the names
// are checked by defaults).
func cpModes(names []string, cp int64) []cpMode {
	if cp == 1 {
		return []cpMode{cpRing}
	}
	out := make([]cpMode, 0, len(names))
	for _, n := range names {
		m, _ := parseCPMode(n)
		out = append(out, m)
	}
	return out
}
