package replay

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Communication: NCCL's buffers (device memory outside PyTorch's
// allocator) and the bytes each collective moves per step.

// NCCL's memory per communicator is nccl.go.

// commGroup is one communicator of this GPU.
type commGroup struct {
	name    string
	size    int64
	intra   bool   // within one node
	local   int64  // the group's ranks in this GPU's node (size when intra)
	pattern string // ring | p2p | alltoall
}

// commGroups lists the communicators a rank uses per step, with Megatron's
// rank order (tp fastest, then cp, dp, pp): a group is inside a node when
// its stride times its size fits the node.
func commGroups(p *core.Plan) []commGroup {
	par := p.Parallel.Norm()
	cl := p.Cluster.Norm(par.GPUs())
	gpn := cl.GPUsPerNode
	gs := make([]commGroup, 0, 16) // Megatron's groups with the others': at most 13
	add := func(name string, size, stride int64, pattern string) {
		if size > 1 {
			gs = append(gs, commGroup{name: name, size: size, intra: size*stride <= gpn, local: ranksInNode(size, stride, gpn), pattern: pattern})
		}
	}
	add("tp", par.TP, 1, "ring")
	cpPattern := "p2p" // ring attention's K/V exchange
	if par.CPMode == "ulysses" {
		cpPattern = "alltoall"
	}
	add("cp", par.CP, par.TP, cpPattern)
	// The data-parallel group of the sharding modes holds the
	// context-parallel ranks too (dp x cp, less HSDP's replicas).
	add("dp", par.ShardDegree(), par.TP, "ring")
	add("dp_replicate", par.DPReplicate, par.TP*par.ShardDegree(), "ring")
	add("ep", par.EP, par.TP*par.CP, "alltoall")
	add("pp", par.PP, par.TP*par.CP*par.DP, "p2p")
	addOne := func(name string) { // a group of one rank that a step still runs collectives on
		gs = append(gs, commGroup{name: name, size: 1, intra: true, local: 1, pattern: "ring"})
	}
	megatronGroups(p, add, addOne) // nccl_megatron.go
	return gs
}

// ranksInNode is how many of a group's ranks, stride apart, share a node
// of gpn GPUs: all of them when they fit, one when the stride is a node or
// more.
func ranksInNode(size, stride, gpn int64) int64 {
	if stride <= 0 || gpn <= 0 || stride >= gpn {
		return 1
	}
	return max(1, min(size, gpn/stride))
}

// commOverheads are the NCCL buffers per communicator, outside PyTorch's
// allocator. They are estimates: NCCL sizes them from the topology it
// detects, the algorithms it connects and NCCL_BUFFSIZE.
func CommOverheads(p *core.Plan) []Overhead {
	if !p.Parallel.Active() {
		return nil
	}
	groups := commGroups(p)
	out := make([]Overhead, len(groups))
	for i, g := range groups {
		out[i] = commOverhead(p, g)
	}
	return out
}

// commOverhead is communicator g's NCCL buffers.
func commOverhead(p *core.Plan, g commGroup) Overhead {
	c := ncclCommOf(p, g) // nccl.go
	b, _ := c.memory(false)
	return Overhead{Name: "nccl_" + g.name, Bytes: b, nccl: c}
}

// GroupSize is the number of ranks in a named group. A degree is read as
// Norm reads it (0 is 1) without normalizing the whole layout, which
// copied it (336 bytes) twice at every collective.
func GroupSize(p *core.Plan, name string) int64 {
	par := &p.Parallel
	switch name {
	case "tp":
		return core.OrOne(par.TP)
	case "cp":
		return core.OrOne(par.CP)
	case "pp":
		return core.OrOne(par.PP)
	case "ep":
		return core.OrOne(par.EP)
	case "dp_replicate":
		return core.OrOne(par.DPReplicate)
	}
	n := par.Norm()
	if name == "edp" {
		return n.ExpertShardDegree()
	}
	return n.ShardDegree() // dp: data-parallel and context-parallel ranks
}

// CommPerStep is every collective of one step, one at a time: the
// lowering's records times the micro-batches, then the data-parallel
// gradient and parameter traffic of the sharding mode (stepComm). Its
// readers sum or filter them: no list of a stage's thousands of records
// is made (a copy of the program's, three times per stage replay, was
// 4 % of the bytes the 405B search allocated).
func (d *distState) CommPerStep() iter.Seq[core.CommRecord] {
	return func(yield func(core.CommRecord) bool) {
		plan := d.plan
		m := max(plan.GradAccum, 1)
		copies := int64(1)
		if st := plan.PipeStage; st != nil {
			m = plan.MicroBatches() * d.Par.VirtualStages
			copies = int64(len(st.Chunks))
		}
		for _, c := range d.p.Comm {
			c.Bytes = c.Bytes * m / copies
			if !yield(c) {
				return
			}
		}
		for _, c := range d.stepComm() {
			if !yield(c) {
				return
			}
		}
	}
}

// stepComm is the data-parallel collectives of one step by the sharding
// mode (gradients reduced, parameters gathered) and the gathers of
// sharded quantized weights.
func (d *distState) stepComm() []core.CommRecord {
	plan := d.plan
	prec := plan.Precision
	if plan.Phase == core.Eval && d.Mode != DistZeRO && d.Mode != DistFSDP {
		return nil
	}
	var out []core.CommRecord
	perMB := max(plan.GradAccum, 1)
	for _, g := range d.groups(true) {
		group := "dp"
		if g.name == "expert" {
			group = "edp"
		}
		if g.n <= 1 {
			continue
		}
		grads, params := prec.Grads.Bytes(g.numel), prec.Params.Bytes(g.numel)
		switch d.Mode {
		case DistDDP:
			out = append(out, core.CommRecord{Kind: "all_reduce", Group: group, Bytes: grads, Backward: true})
		case DistMegatron:
			if d.Par.DistributedOptimizer { // fp8 primary weights gathered in fp8 (core/te_fp8_params.go)
				params = prec.Params.Bytes(g.numel-g.fp8) + units.FP8.Bytes(g.fp8)
				out = append(out, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: grads, Backward: true}, core.CommRecord{Kind: "all_gather", Group: group, Bytes: params, Backward: false})
			} else {
				out = append(out, core.CommRecord{Kind: "all_reduce", Group: group, Bytes: grads, Backward: true})
			}
		case DistZeRO:
			// DeepSpeed reduces in communication_data_type, the model's dtype
			// (engine.py l.1405-1416), whatever it accumulates in (zero_accum.go)
			grads = params
			switch {
			case d.bf16opt: // BF16_Optimizer: the whole group all-reduced (zero_accum.go)
				out = append(out, core.CommRecord{Kind: "all_reduce", Group: group, Bytes: prec.Params.Bytes(ZeroPartition(g.numel, g.n) * g.n), Backward: true}, core.CommRecord{Kind: "all_gather", Group: group, Bytes: params, Backward: false})
			case d.Par.Zero == 1:
				out = append(out, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: grads, Backward: true}, core.CommRecord{Kind: "all_gather", Group: group, Bytes: params, Backward: false})
			case d.Par.Zero == 2:
				out = append(out, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: grads * perMB, Backward: true}, core.CommRecord{Kind: "all_gather", Group: group, Bytes: params, Backward: false})
			case d.Par.Zero == 3:
				n, _ := d.gatheredNumel(g)
				gathered := d.gatherDT.Bytes(n)
				gathers, _ := d.passGathers()
				out = append(out, core.CommRecord{Kind: "all_gather", Group: group, Bytes: gathers * gathered * perMB, Backward: false}, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: prec.Params.Bytes(n) * perMB, Backward: true})
			}
		case DistFSDP:
			n, fp8 := d.gatheredNumel(g)
			gathered, reduced := d.gatherDT.Bytes(n-fp8)+units.FP8.Bytes(fp8), d.reduceDT.Bytes(n)
			gathers, perMB := d.passGathers()
			reductions := perMB
			if d.noSync { // FSDP1's no_sync(): the synchronising micro-batch reduces, once per step
				reductions = 1
			}
			all := gathers * gathered
			if gathers > 1 { // the root unit is gathered once a micro-batch
				rn, rf := d.rootNumel(g)
				all -= (gathers - 1) * (d.gatherDT.Bytes(rn-rf) + units.FP8.Bytes(rf))
			}
			out = append(out, core.CommRecord{Kind: "all_gather", Group: group, Bytes: all * perMB, Backward: false}, core.CommRecord{Kind: "reduce_scatter", Group: group, Bytes: reduced * reductions, Backward: true})
			if r := d.Par.DPReplicate; r > 1 { // HSDP: the sharded gradient all-reduced over the replicas
				out = append(out, core.CommRecord{Kind: "all_reduce", Group: "dp_replicate", Bytes: reduced / g.n * reductions, Backward: true})
			}
		}
	}
	out = append(out, d.frozenComm()...)
	return append(out, d.quantComm()...)
}

// frozenComm is the all-gathers of the frozen (unquantized) parameters
// ZeRO-3 and FSDP shard: a LoRA run's base weights, gathered in the
// forward and again in the backward (the input's gradient reads them, and
// a recompute) as the trainable ones are, with no gradient to reduce;
// DPO's reference copy in its forward alone (core.ParamInfo.Reference:
// run under no_grad). Quantized weights are quantComm's.
func (d *distState) frozenComm() []core.CommRecord {
	if d.Mode != DistFSDP && (d.Mode != DistZeRO || d.Par.Zero != 3) {
		return nil
	}
	gathers, perMB := d.passGathers()
	var out []core.CommRecord
	for _, g := range d.groups(false) {
		if g.n <= 1 {
			continue
		}
		ref := d.refNumel(g)
		group := "dp"
		if g.name == "expert" {
			group = "edp"
		}
		n, _ := d.gatheredNumel(g)
		b := gathers*d.gatherDT.Bytes(n-ref) + d.gatherDT.Bytes(ref)
		if d.Mode == DistFSDP && gathers > 1 { // the root unit is gathered once a micro-batch
			rn, _ := d.rootNumel(g)
			b -= (gathers - 1) * d.gatherDT.Bytes(rn)
		}
		out = append(out, core.CommRecord{Kind: "all_gather", Group: group, Bytes: b * perMB})
	}
	return out
}

// refNumel is how many of g's elements are DPO's reference copy's
// (core.ParamInfo.Reference), gathered in its forward alone.
func (d *distState) refNumel(g paramGroup) int64 {
	var ref int64
	for _, pi := range g.params {
		if d.p.Params[pi].Reference {
			ref += d.p.Params[pi].Numel
		}
	}
	return ref
}

// rootNumel is how many of g's elements (and of those, how many gathered
// in fp8) are gathered at a pass's edge (atEdge): under FSDP the root
// unit's, everything outside the blocks and fsdp_units, kept unsharded
// from its forward to its backward (the root is never resharded after
// forward: torch 2.15 _fsdp_state.py _lazy_init sets the root's
// post_forward_mesh_info to None, FSDP1's _post_forward_reshard skips the
// root), so gathered once a micro-batch where the other units are
// gathered again for their backward (and for DPO's reference forward over
// the policy's modules: the root is still gathered then). gather.go
// replays it so; stepComm and frozenComm count it so. Under ZeRO-3 the
// modules outside the blocks it does not keep gathered.
//
// Under FSDP a parameter no op reads (a stand-in program's: the search's
// profiles) is placed by its name, as buildUnits would place it.
func (d *distState) rootNumel(g paramGroup) (numel, fp8 int64) {
	if d.unitOf == nil || (d.Mode != DistFSDP && d.Mode != DistZeRO) {
		return 0, 0
	}
	for _, pi := range g.params {
		p := &d.p.Params[pi]
		if d.ungathered(pi) {
			continue
		}
		var root bool
		if u := d.unitOf[d.root(pi)]; d.Mode == DistFSDP && u != none {
			root = d.units[u].root
		} else {
			root = d.atEdge(p)
		}
		if root {
			numel += p.Numel
			if p.GatherFP8 {
				fp8 += p.Numel
			}
		}
	}
	return numel, fp8
}

// ungathered reports whether ZeRO-3 or FSDP never gathers parameter pi
// (nor reduces its gradient): it is in no gather unit, as a parameter no
// op reads is not (a tower the step does not run: a vision tower without
// images, Gemma 4's audio tower), unless FSDP1 flattened it into a unit
// that runs (fsdp1FoldIdle). FSDP2's pre-forward hook of a module that
// never runs never fires, and its post-backward is a no-op
// (shard_units.go holdsIdle); ZeRO-3 fetches a module's parameters in
// the module's own pre-forward hook and reduces the gradients the
// backward makes. A stand-in program (the search's) has no op: it leaves
// such parameters out itself.
func (d *distState) ungathered(pi int32) bool {
	return !d.standIn && d.unitOf != nil && d.unitOf[d.root(pi)] == none
}

// gatheredNumel is how many of g's elements (and of those, how many in
// fp8) ZeRO-3 or FSDP gathers and reduces: g's less those ungathered.
func (d *distState) gatheredNumel(g paramGroup) (numel, fp8 int64) {
	numel, fp8 = g.numel, g.fp8
	for _, pi := range g.params {
		if d.ungathered(pi) {
			n := d.elems(pi)
			numel -= n
			if d.p.Params[pi].GatherFP8 {
				fp8 -= n
			}
		}
	}
	return numel, fp8
}

// quantComm is the all-gather of sharded quantized weights per step
// (they are frozen: no gradient to reduce).
func (d *distState) quantComm() []core.CommRecord {
	var b int64
	for pi := range d.p.Params {
		if p := &d.p.Params[pi]; p.Quant != "" && p.TiedTo < 0 && !d.ungathered(int32(pi)) {
			b += d.QuantGatherBytes(p)
		}
	}
	return d.QuantGathers(b)
}

// QuantGatherBytes is the bytes one gather of quantized parameter p
// moves under ZeRO-3 or FSDP: FSDP2's sharded tensors padded to the
// ranks (quantGathered), FSDP1's and ZeRO-3's codes in the storage dtype
// (quantCodes). The search prices its profiles' quantized weights with
// it, from their quantization and shape alone (p need not be one of the
// program's).
func (d *distState) QuantGatherBytes(p *core.ParamInfo) int64 {
	if d.Mode == DistFSDP && !d.fsdp1 {
		return d.quantGatheredOf(p, d.degreeOf(p.Role))
	}
	return d.quantStorageDT().Bytes(d.quantCodesOf(p))
}

// QuantGathers is a step's all-gathers of quantized weights of b bytes
// a gather (QuantGatherBytes summed): each micro-batch's passes gather
// them; none where the sharding does not shard them.
func (d *distState) QuantGathers(b int64) []core.CommRecord {
	if b == 0 || d.Mode != DistFSDP && (d.Mode != DistZeRO || d.Par.Zero != 3) {
		return nil
	}
	gathers, perMB := d.passGathers()
	return []core.CommRecord{{Kind: "all_gather", Group: "dp", Bytes: gathers * b * perMB}}
}

// passGathers is how many times a micro-batch of ZeRO-3 or FSDP gathers
// a sharded unit (FSDP's root aside: rootNumel) and how many times a step
// does that: in the forward and again in the backward (the input's
// gradient reads the weights, and a recompute), once more for DPO's
// reference forward over the policy's modules (refGathers); once under
// FSDP's reshard_after_forward=False (the forward's gather serves the
// backward) and in evaluation (a forward alone); once a step on a
// pipeline stage's FSDP2 units (pipeHold: gathered through all
// micro-batches).
func (d *distState) passGathers() (gathers, perMB int64) {
	perMB = max(d.plan.GradAccum, 1)
	switch {
	case d.pipeHold:
		return 1, 1
	case d.plan.Phase == core.Eval, d.Mode == DistFSDP && d.Par.NoReshard:
		return 1, perMB
	}
	return 2 + d.refGathers(), perMB
}

// refGathers is 1 when DPO's reference forward runs the policy's own
// modules with the adapters disabled (reference "adapters"): their frozen
// weights are gathered once more a micro-batch (buildUnits' refFirst and
// refLast); else 0.
func (d *distState) refGathers() int64 {
	if d.refOps != nil {
		return 1
	}
	return 0
}

// busFactor is the fraction of a message each rank sends over the links
// in NCCL's ring algorithms (nccl-tests PERFORMANCE.md: all-reduce
// 2(n-1)/n, all-gather and reduce-scatter (n-1)/n).
func BusFactor(kind string, n int64) float64 {
	if n <= 1 {
		return 0
	}
	f := float64(n-1) / float64(n)
	switch kind {
	case "all_reduce":
		return 2 * f
	case "send_recv":
		return 1
	}
	return f
}

// finishComm fills r.comm_bytes (by collective kind) and the network
// traffic of the step.
func (d *distState) finishComm(rep *Report) {
	if d == nil {
		return
	}
	// The bytes by kind in a list, not a map: a few kinds over hundreds
	// of collectives a step (a map's update per collective was 0.6 % of
	// BenchmarkEvaluateLlama70B3D's instructions). Sums of integers:
	// the same in any order.
	var room [8]Share // (a step's kinds; more go to the heap)
	by := room[:0]
	var net float64
	for c := range d.CommPerStep() {
		k := 0
		for k < len(by) && by[k].Name != c.Kind {
			k++
		}
		if k == len(by) {
			by = append(by, Share{Name: c.Kind})
		}
		by[k].Bytes += c.Bytes
		net += float64(c.Bytes) * BusFactor(c.Kind, GroupSize(d.plan, c.Group))
	}
	slices.SortFunc(by, func(a, b Share) int { return strings.Compare(a.Name, b.Name) })
	rep.CommBytes = append(rep.CommBytes, by...)
	rep.Traffic.Network += int64(net)
	for _, g := range commGroups(d.plan) {
		if g.name == "tp" && !g.intra {
			rep.Notes = append(rep.Notes, fmt.Sprintf("tp=%d spans nodes: tensor parallelism's per-layer collectives cross the network (keep tp within a node)", g.size))
		}
	}
	// Trainable parameters of the whole model, not of this rank: every
	// rank of an expert-parallel group holds experts/ep of each MoE.
	if ep := d.Par.EP; ep > 1 {
		rep.TrainableParams = 0
		for _, p := range d.p.Params {
			if p.Trainable && p.TiedTo < 0 && !p.StageCopy {
				n := p.FullNumel
				if IsExpertRole(p.Role) {
					n *= ep
				}
				rep.TrainableParams += n
			}
		}
	}
}
