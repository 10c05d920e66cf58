package replay

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

const minOffload = 1024 // torchtune OffloadActivations min_offload_size

// optimizerTier is where master weights and optimizer state live: "" on
// the GPU, "cpu" or "nvme". FSDP's CPU offload moves the optimizer with
// the parameters (FSDP2's CPUOffloadPolicy, FSDP1's CPUOffload: the
// optimizer steps on the host shards). DeepSpeed's ZeRO-3 picks the two
// devices independently: with offload_param alone stage3.py
// (_configure_offloading, _create_fp32_partitions at edaa722) makes the
// fp32 partitions on self.device, the GPU unless offload_optimizer is
// set, and the optimizer steps there.
func (r *Replay) optimizerTier() string {
	o := r.Plan.Offload
	if o == nil {
		return ""
	}
	if o.Optimizer != "" {
		return o.Optimizer
	}
	if o.Params != "" && r.Plan.Parallel.FSDP {
		return o.Params
	}
	return ""
}

func (r *Replay) actsOffloaded() bool {
	return r.Plan.Offload != nil && r.Plan.Offload.Activations != "" && r.Plan.Phase != core.Eval
}

// offloadRecord is the replay's offload bookkeeping: what ZeRO-Offload
// and FSDP2's CPUOffloadPolicy keep on the host (shard_offload.go,
// fsdp_offload.go) and the activations' copies.
type offloadRecord struct {
	hostStates, hostGrads, hostParams int64
	hostGradsDT                       units.DType // the dtype of hostGrads, the gradients the host optimizer steps on
	hostGradsPinned                   bool        // hostGrads are pinned (FSDP1's _cpu_grad, fsdp1_offload.go)
	// gradBufs is ZeRO-Offload's gradient buffers in pinned host memory
	// other than the gradients the host optimizer steps on (hostGrads):
	// ZeRO-3's grad_partitions_flat_buffer, stages 1-2's
	// accumulated_grads_in_cpu and temp_grad_buffer_for_cpu_offload, in
	// gradBufDT.
	gradBufs  int64
	gradBufDT units.DType
	// stepStaging is the pageable fp32 host tensor torch's copy_ makes
	// for the largest sub-group when ZeRO-3 copies the GPU-updated fp32
	// partition into the 16-bit host partition (shard_offload.go
	// paramOnlyStepCopy).
	stepStaging    int64
	acts, actsPeak int64 // activation bytes on the host now, at most
	fetched        map[core.Value]bool
	pinned         map[core.Value]int64 // value -> the pinned host blocks holding its copies
	headSaved      []bool               // values the output projection or the loss saves (torchtune keeps them)
	outs           []CopyOut            // torchtune's copies to the host (offload_timeline.go)
	events         []OffloadEvent       // the backward's ops and copies back
	actPCIe        int64                // their bytes, both ways
	nvme           *nvmeRecord          // ZeRO-Infinity's NVMe tier (offload_nvme.go)
}

// addHostGrads counts b bytes of dtype dt of the gradients the host
// optimizer steps on (ZeRO-Offload's fp32 partition, FSDP2's gradient
// shards).
func (fo *offloadRecord) addHostGrads(dt units.DType, b int64) {
	fo.hostGrads += b
	fo.hostGradsDT = dt
}

// addGradBuffer counts b bytes of dtype dt of pinned gradient buffers
// on the host.
func (fo *offloadRecord) addGradBuffer(dt units.DType, b int64) {
	fo.gradBufs += b
	fo.gradBufDT = dt
}

func (r *Replay) fo() *offloadRecord {
	if r.off == nil {
		r.off = &offloadRecord{}
	}
	return r.off
}

// afterForwardOp copies saved activations whose forward use is over to
// the host (activation offload).
func (r *Replay) afterForwardOp(i int) {
	if r.phase == PhaseRecompute && !r.keeps(&r.P.Ops[i]) {
		r.recordEvent(OffloadEvent{Kind: EvRecompute, Op: int32(i)})
	}
	if r.phase != PhaseForward || (!r.actsOffloaded() && r.hostHolds == nil) {
		return
	}
	op := &r.P.Ops[i]
	for _, vs := range [][]core.Value{op.In, op.Out} {
		for _, v := range vs {
			if r.actsOffloaded() {
				r.offloadValue(v, i)
			} else {
				r.saveOnCPU(v)
			}
		}
	}
}

// saveOnCPU copies a value that ops of an offloaded region save
// (core.Region.Offload) to pinned host memory once the forward is done
// with it: save_on_cpu's pack, torch.empty(pin_memory=True).copy_(t), once
// per saving op. The GPU tensor goes when nothing else holds it (a
// checkpoint's input stays, _NoopSaveInputs keeps it); unpack copies it
// back before its backward (beforeBackwardOp).
func (r *Replay) saveOnCPU(v core.Value) {
	n := r.hostHolds[v]
	vi := &r.P.Values[v]
	if n == 0 || !r.done[v] || r.valT[v] == none || (vi.Cat != core.CatActivations && vi.Cat != core.CatParams) {
		return // save_on_cpu copies autocast's weight copies too, not the parameters (never values here)
	}
	fo := r.fo()
	if fo.fetched == nil {
		fo.fetched = map[core.Value]bool{}
	}
	if _, copied := fo.fetched[v]; copied {
		return
	}
	copies := int64(n) * vi.Bytes
	fo.holdPinned(v, int64(n)*PinnedBlock(vi.Bytes))
	r.Rep.Traffic.PCIe += 2 * copies
	fo.fetched[v] = true // on the GPU still, unless released below
	r.dropCopied(v)
}

// dropCopied frees the GPU tensor of a value copied to the host once
// only its offloaded savers hold it.
func (r *Replay) dropCopied(v core.Value) {
	if r.off.fetched[v] && r.holds[v] == r.hostHolds[v] && v != r.P.Input && r.valT[v] != none {
		r.release(r.valT[v])
		r.valT[v] = none
		r.off.fetched[v] = false
	}
}

// dropCopiedAfterForward frees, once autocast's cache is cleared, the
// weight copies and other values save_on_cpu copied while something else
// still held them.
func (r *Replay) dropCopiedAfterForward() {
	if r.hostHolds == nil || r.off == nil {
		return
	}
	for _, v := range slices.Sorted(maps.Keys(r.off.fetched)) { // in value order: the allocator's state is deterministic
		r.dropCopied(v)
	}
}

func (r *Replay) offloadValue(v core.Value, i int) {
	vi := &r.P.Values[v]
	if !r.done[v] || r.valT[v] == none || !r.Saved[v] || vi.Cat != core.CatActivations || vi.Bytes < minOffload || v == r.P.Input || v == r.P.Labels {
		return
	}
	fo := r.fo()
	if fo.headSaved == nil {
		fo.headSaved = r.savedByHead()
	}
	if fo.headSaved[v] {
		return
	}
	if fo.fetched == nil {
		fo.fetched = map[core.Value]bool{}
	}
	r.release(r.valT[v])
	r.valT[v] = none
	fo.fetched[v] = false
	fo.holdPinned(v, PinnedBlock(vi.Bytes))
	r.Rep.Traffic.PCIe += 2 * vi.Bytes
	r.recordCopyOut(v, i)
}

// savedByHead marks the values that the output projection and the ops
// after it (the loss) save for backward. torchtune's recipes run only
// the model under OffloadActivations (full_finetune_single_device.py
// _loss_step at 1814feb17: "with self.activations_handling_ctx: logits =
// self._model(**batch)", the loss after it), and
// get_act_offloading_ctx_manager puts the output projection under a
// NoOpManager ("disable offloading the last output Linear in every
// step", training/_activation_offloading.py): what they save stays on the
// GPU. The head is the first op reading an lm_head parameter
// (core.RoleLMHead); a model without one offloads up to its end.
func (r *Replay) savedByHead() []bool {
	out := make([]bool, len(r.P.Values))
	head := len(r.P.Ops)
	for i := range r.P.Ops {
		for _, pi := range r.P.Ops[i].Params {
			if r.P.Params[pi].Role == core.RoleLMHead || r.P.Params[r.resolve(pi)].Role == core.RoleLMHead {
				head = i
				break
			}
		}
		if head < len(r.P.Ops) {
			break
		}
	}
	for i := head; i < len(r.P.Ops); i++ {
		op := &r.P.Ops[i]
		for _, v := range op.Saved {
			out[v] = true
		}
		if r.keeps(op) {
			for _, v := range op.Out {
				out[v] = true
			}
		}
	}
	return out
}

// PinnedBlock is the pinned host memory PyTorch's CachingHostAllocator
// holds for a request of n bytes: the request rounded up to a power of
// two ("Round up the allocation to the nearest power of two to improve
// reuse", c10::llvm::PowerOf2Ceil; pytorch/pytorch
// aten/src/ATen/core/CachingHostAllocator.h at 04456333a394, allocate();
// torch 2.15.0 (d0f2af8b) the same, ll. 343-350, unless
// PYTORCH_CUDA_ALLOC_CONF's pinned_max_round_threshold is set, default
// SIZE_MAX: c10/core/AllocatorConfig.h l. 360). Both torchtune's
// OffloadActivations (torch.empty_like(pin_memory=True)) and torch's
// save_on_cpu(pin_memory=True) (torch.empty(pin_memory=True)) allocate
// their copies there.
func PinnedBlock(n int64) int64 {
	if n <= 1 {
		return n
	}
	return 1 << bits.Len64(uint64(n-1))
}

// holdPinned records b bytes of pinned blocks holding v's host copies.
// A freed block goes back to the allocator's free list of its size
// (free(): free_list_[size_index(size)]) and serves the next request
// that rounds to the same size: the next micro-batch's or step's copies
// of the same tensors. What the host holds is therefore the most the
// step's copies hold at once (actsPeak), not a sum over micro-batches.
func (fo *offloadRecord) holdPinned(v core.Value, b int64) {
	if fo.pinned == nil {
		fo.pinned = map[core.Value]int64{}
	}
	fo.pinned[v] += b
	fo.acts += b
	fo.actsPeak = max(fo.actsPeak, fo.acts)
}

// beforeBackwardOp brings back what op i's backward (or its region's
// recompute) reads.
func (r *Replay) beforeBackwardOp(i int) {
	op := &r.P.Ops[i]
	if r.off == nil || r.off.fetched == nil {
		return
	}
	fetch := func(v core.Value) {
		done, ok := r.off.fetched[v]
		if !ok || done {
			return
		}
		vi := &r.P.Values[v]
		r.valT[v] = r.allocateOn(StreamOffload, Alloc{Tensor: vi.Name, Shape: vi.Shape, DType: vi.Dtype, Bytes: r.routedBytes(v, vi.Bytes), Why: vi.Why + " (copied back from host memory on the offload stream)", Cat: core.CatActivations})
		r.off.fetched[v] = true
		r.off.acts -= r.off.pinned[v] // the host copy's block goes back to the cache once the copy is done
		delete(r.off.pinned, v)
		r.recordEvent(OffloadEvent{Kind: EvCopyIn, Op: int32(i), Bytes: vi.Bytes})
	}
	for _, v := range op.Saved {
		fetch(v)
	}
	if op.Region != 0 && !r.Redone[op.Region-1] {
		for _, v := range r.regionIn[op.Region-1] {
			fetch(v)
		}
		reg := r.P.Regions[op.Region-1]
		for j := reg.First; j < reg.End; j++ {
			if r.keeps(&r.P.Ops[j]) {
				for _, v := range r.P.Ops[j].Out {
					fetch(v)
				}
			}
		}
	}
}

// afterBackwardOp notes op i's backward in the offload timeline.
func (r *Replay) afterBackwardOp(i int) {
	r.recordEvent(OffloadEvent{Kind: EvBackward, Op: int32(i)})
}

// offloadStep reports whether the optimizer step runs off the GPU.
func (r *Replay) offloadStep() bool { return r.optimizerTier() != "" }

// finishOffload fills host memory and checks all of it (offload, paged
// state, host tables) against the node's RAM.
func (r *Replay) finishOffload(rep *Report) error {
	fo := r.off
	if fo == nil {
		return r.checkHost(rep) // paged optimizer state, host tables
	}
	grads := fo.hostGradsDT.String() + " gradients"
	if fo.hostGradsPinned {
		grads += " (pinned)"
	}
	for _, s := range append([]Share{
		{Name: "optimizer state and master weights", Bytes: fo.hostStates},
		{Name: grads, Bytes: fo.hostGrads},
		{Name: fo.gradBufDT.String() + " gradient buffers (pinned)", Bytes: fo.gradBufs},
		{Name: "parameters (pinned)", Bytes: fo.hostParams},
		{Name: "fp32 staging of the updated partition (pageable, at the step)", Bytes: fo.stepStaging},
		{Name: "activations (pinned)", Bytes: fo.actsPeak},
	}, r.nvmeHost(rep)...) {
		if s.Bytes > 0 {
			rep.HostBreakdown = append(rep.HostBreakdown, s)
			rep.HostMemory += s.Bytes
		}
	}
	if rep.HostMemory > 0 {
		var parts []string
		var pinned int64
		for _, s := range rep.HostBreakdown {
			parts = append(parts, s.Name+" "+units.FormatBytes(s.Bytes))
			if strings.Contains(s.Name, "pinned") {
				pinned += s.Bytes
			}
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("host memory per GPU %s: %s; %s of it pinned", units.FormatBytes(rep.HostMemory), strings.Join(parts, ", "), units.FormatBytes(pinned)))
	}
	return r.checkHost(rep)
}

// checkHost fails when the GPUs of one node need more host memory than
// Plan.HostMemory. Unset, memsh does not know the node's RAM: a note says
// what a node needs and that train(host_memory=) checks it, since pinned
// pages (cudaHostAlloc, what save_on_cpu and the offload buffers use) must
// be resident in RAM: the OS cannot swap them out (CUDA C++ Programming
// Guide, "Page-Locked Host Memory": "page-locked host memory is a scarce
// resource", https://docs.nvidia.com/cuda/cuda-c-programming-guide/#page-locked-host-memory).
func (r *Replay) checkHost(rep *Report) error {
	if rep.HostMemory == 0 {
		return nil
	}
	need, gpus := HostNeed(r.Plan, rep.HostMemory)
	per := fmt.Sprintf("%d GPUs x %s", gpus, units.FormatBytes(rep.HostMemory))
	if gpus == 1 {
		per = "1 GPU"
	}
	limit := r.Plan.HostMemory
	if limit <= 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("host memory unchecked: a node needs %s of host RAM for this step (%s); "+
			"give the node's RAM with train(host_memory=N) and memsh fails the plan when it falls short", units.FormatBytes(need), per))
		return nil
	}
	if need <= limit {
		return nil
	}
	return &units.Error{Path: "train",
		Msg: fmt.Sprintf("offload needs %s of host memory per node (%s) but host_memory is %s",
			units.FormatBytes(need), per, units.FormatBytes(limit)),
		Hint: r.hostHint(rep) + ", use more nodes, or give the real host RAM with host_memory="}
}

// HostNeed is the host memory a node needs for plan when each GPU needs
// perGPU bytes, and the GPUs of that node: the cluster's gpus_per_node,
// unset an 8-GPU node or fewer when the layout has fewer GPUs
// (hw.Cluster.Norm). train(host_memory=) is checked against it.
func HostNeed(plan *core.Plan, perGPU int64) (need, gpus int64) {
	gpus = max(plan.Cluster.Norm(plan.Parallel.Norm().GPUs()).GPUsPerNode, 1)
	return perGPU * gpus, gpus
}

// hostHint names the settings that put the largest host shares there.
func (r *Replay) hostHint(rep *Report) string {
	o := r.Plan.Offload
	if o == nil {
		o = &core.Offload{}
	}
	var ways []string
	for _, s := range rep.HostBreakdown {
		switch {
		case s.Name == "activations (pinned)" && o.Activations == "":
			ways = append(ways, "turn off the model's own activation offload (anemoi's processor cpu_offload=False)")
		case s.Name == "activations (pinned)":
			ways = append(ways, "offload fewer activations (activations=None)")
		case strings.HasPrefix(s.Name, "optimizer state") && o.Optimizer == "cpu" && r.Plan.Parallel.Zero == 3:
			// ZeRO-Offload at stage 3: ZeRO-Infinity swaps the state to
			// NVMe through smaller pinned buffers when it spans sub-groups.
			ways = append(ways, "move the optimizer state to NVMe (offload(optimizer=\"nvme\"), ZeRO-Infinity; its pinned swap buffers hold the largest sub-group) or keep it on the GPU if it fits there")
		case strings.HasPrefix(s.Name, "optimizer state") && o.Optimizer == "cpu":
			// ZeRO-Offload at stages 1-2: DeepSpeed's NVMe tier needs stage 3.
			ways = append(ways, "keep the optimizer state on the GPU (no offload(optimizer=)) if it fits there")
		case strings.HasPrefix(s.Name, "paged optimizer state"):
			ways = append(ways, "give the optimizer state room on the GPU (it pages out under pressure)")
		}
	}
	if len(ways) == 0 {
		return "keep less on the host"
	}
	return strings.Join(slices.Compact(ways), ", ")
}
