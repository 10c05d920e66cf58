package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Pipeline parallelism (Narayanan et al. 2021, arXiv:2104.04473;
// megatron/core/pipeline_parallel/schedules.py).
//
// The repeated blocks (the largest repeat() of the model) are split into
// pp stages, or pp*v model chunks with the interleaved schedule (chunk g
// runs on stage g mod pp). The first chunk also carries the layers before
// the blocks (the embedding), the last one the layers after them (final
// norm), the output layer and the loss.
//
// Each stage is replayed on its own, as a program holding the micro-batches
// the schedule keeps in flight at its peak, forwards first and backwards
// after (the order of backwards among them does not change the peak):
//
//   - 1F1B: stage p runs pp-p-1 warm-up forwards and one more before its
//     first backward, so min(pp-p, m) micro-batches are in flight
//     (forward_backward_pipelining_without_interleaving);
//   - interleaved: num_warmup_microbatches = (pp-p-1)*2 + (v-1)*pp chunk
//     forwards, plus one (forward_backward_pipelining_with_interleaving),
//     at most m*v; forward k runs chunk (k mod pp*v) div pp. On the first
//     stage that is pp*v + pp - 1 chunks of L/(pp*v) layers: Korthikanti's
//     (1 + (pp-1)/(pp*v)) times the activations of L/pp layers.
//
// Every micro-batch copy has its own input (the batch on the first chunk,
// else the activation received from the previous stage, which requires
// grad) and its own output: the loss on the last chunk, else the
// activation sent to the next stage, whose storage Megatron frees right
// after the send (deallocate_pipeline_outputs, set by
// core_transformer_config_from_args); its gradient arrives from the next
// stage when the backward reaches it. Copies of a chunk share its
// parameters.

// stageSpec is the stage a per-stage plan copy replays.
type StageSpec struct {
	Stage    int64
	Inflight int64 // chunk forwards in flight at the peak
	Chunks   []int64
	Split    *pipeSplit
}

// stageProg is what the replay needs beyond the program: the outputs whose
// gradients are seeded when the backward reaches their producer.
type stageProg struct {
	Outputs []StageOut
	// What torch.distributed.pipelining keeps (pipeline_torch.go).
	HeldGrads []Value       // received activations whose gradients live until the step ends
	Buffers   []StageBuffer // allocated before the step and kept: the micro-batches not in flight
	Merged    *StageBuffer  // the last stage's outputs concatenated after the backward, then dropped
	Chunks    []StageChunk  // the model chunks of the stage, in the order their first copies are lowered
}

// StageChunk is one model chunk of a stage as its replay meets it. The
// replay holds the schedule's in-flight copies of the chunk; the chunk's
// other micro-batches ran their forward and backward before that moment
// (the steady state), so every micro-batch's backward of the chunk has run
// once the replay's backward has passed its first copy.
type StageChunk struct {
	Chunk   int64
	Params  [2]int // the parameters of its first copy; the other copies' are tied to them
	FirstOp int32  // the first op of its first copy: the chunk's last backward ends there
	Done    int64  // micro-batches whose backward ran before the replayed moment
}

type StageOut struct {
	V    Value
	Loss bool // a loss (4-byte seed) rather than a sent activation
	// Buffer: its gradient arrives in a receive buffer allocated before
	// the step and kept (torch's grad_recv_info), not in a fresh tensor.
	Buffer bool
}

// pipeUnit is a top-level piece of the model: one block of the split
// repeat, or a layer before or after the blocks.
type pipeUnit struct {
	anc   []*Sequential // the Sequentials on the path to the unit
	layer Layer
	rep   *Repeat // the split repeat, for blocks
	block int64   // block index, -1 for other layers
}

// scope is the module path the unit's ancestors open.
func (u pipeUnit) scope() string {
	p := ""
	for _, s := range u.anc {
		p = JoinName(p, ModuleName(s))
	}
	return p
}

// Repeat is the split repeat a block belongs to (nil for other units).
func (u pipeUnit) Repeat() *Repeat { return u.rep }

// BlockPath is the module path of a block of the split repeat, as the
// lowering names it: "model.layers.5".
func (u pipeUnit) BlockPath() string {
	return JoinName(JoinName(u.scope(), ModuleName(u.rep)), Itoa(u.block))
}

// pipeSplit is the model cut into layers before the blocks, the blocks,
// and layers after them.
type pipeSplit struct {
	pre, Blocks, post []pipeUnit
	Chunks            int64   // pp * v
	Layers            []int64 // blocks of each chunk (pipeline_layers.go)
	first             []int64 // index of each chunk's first block
}

// ChunkBlocks is the range [lo, hi) of the blocks chunk g holds.
func (s *pipeSplit) ChunkBlocks(g int64) (lo, hi int64) {
	return s.first[g], s.first[g] + s.Layers[g]
}

// splitStages flattens the model around its largest repeat() and splits
// its blocks over the chunks (ChunkLayers).
func SplitStages(m *Model, par Parallelism) (*pipeSplit, error) {
	par = par.Norm()
	best, layers, err := stageLayers(m, par)
	if err != nil {
		return nil, err
	}
	chunks := par.PP * par.VirtualStages
	s := &pipeSplit{Chunks: chunks, Layers: layers, first: make([]int64, chunks), Blocks: make([]pipeUnit, 0, best.Count())}
	for g := int64(1); g < chunks; g++ {
		s.first[g] = s.first[g-1] + layers[g-1]
	}
	seen := false
	var flatten func(ls []Layer, anc []*Sequential)
	flatten = func(ls []Layer, anc []*Sequential) {
		for _, l := range ls {
			switch x := l.(type) {
			case *Repeat:
				if x == best {
					for j := int64(0); j < x.Count(); j++ {
						s.Blocks = append(s.Blocks, pipeUnit{anc: anc, layer: x, rep: x, block: j})
					}
					seen = true
					continue
				}
			case *Sequential:
				if ContainsLayer(x, best) {
					flatten(x.Layers, append(append([]*Sequential(nil), anc...), x))
					continue
				}
			}
			u := pipeUnit{anc: anc, layer: l, block: -1}
			if seen {
				s.post = append(s.post, u)
			} else {
				s.pre = append(s.pre, u)
			}
		}
	}
	flatten(m.Layers, nil)
	return s, nil
}

// SplitRepeat is the repeat() whose blocks SplitStages splits (m's
// largest), with SplitStages' error for a model without a pipeline: what
// SplitStages(m, Parallelism{}) finds, without flattening the model into
// its blocks (the search cuts that repeat for each profile it lowers).
func SplitRepeat(m *Model) (*Repeat, error) {
	best, _, err := stageLayers(m, Parallelism{}.Norm())
	return best, err
}

// stageLayers finds m's largest repeat() and the blocks par's chunks hold
// (ChunkLayers): what SplitStages checks, without flattening the model
// (Plan.Validate runs it for every layout a search enumerates).
func stageLayers(m *Model, par Parallelism) (*Repeat, []int64, error) {
	return stageLayersIn(nil, m, par)
}

// stageLayersIn is stageLayers writing the chunks' blocks into dst's
// room when it has enough (chunkLayersIn).
func stageLayersIn(dst []int64, m *Model, par Parallelism) (*Repeat, []int64, error) {
	var best *Repeat
	var walk func(ls []Layer)
	walk = func(ls []Layer) {
		for _, l := range ls {
			switch x := l.(type) {
			case *Repeat:
				if best == nil || x.Count() > best.Count() {
					best = x
				}
			case *Sequential:
				walk(x.Layers)
			}
		}
	}
	walk(m.Layers)
	if best == nil {
		return nil, nil, &units.Error{Path: m.Name, Msg: fmt.Sprintf("pp=%d needs a repeat() of blocks to split into stages", par.PP),
			Hint: "pipeline stages split the repeated transformer blocks: model(..., repeat(block, n), ...)"}
	}
	layers, err := par.chunkLayersIn(dst, best.Count(), m.Name)
	return best, layers, err
}

func ContainsLayer(s *Sequential, target Layer) bool {
	found := false
	Walk(s, "", func(_ string, l Layer) {
		if l == target {
			found = true
		}
	})
	return found
}

// lowerStage lowers the in-flight micro-batch copies of one stage.
func (p *Plan) lowerStage(b *Builder) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = loweringError(r)
		}
	}()
	st := p.PipeStage
	defer b.Scope(fmt.Sprintf("stage%d", st.Stage))()
	sp := st.Split
	m := p.Model
	b.P.Stage = &stageProg{}
	first := map[int64][2]int{} // chunk -> param range of its first copy
	var copies []stageCopy
	var srcs blockCopies // the blocks to copy (block_clone.go)
	ops0, values0, params0, comm0 := len(b.P.Ops), len(b.P.Values), len(b.P.Params), len(b.P.Comm)
	for k, g := range st.Chunks {
		done := b.Scope(fmt.Sprintf("mb%d", k))
		p0, bu0, o0 := len(b.P.Params), len(b.P.Buffers), len(b.P.Ops)
		if k == 1 { // room for the other copies, as large as the first
			b.P.reserve(int64(len(st.Chunks)-1), 0, ops0, values0, params0, comm0)
		}
		var x Value
		c := stageCopy{chunk: g, recv: NoValue}
		if g == 0 {
			x = b.stageBatch(m)
		} else {
			x = b.stageRecv(m)
			c.recv = x
		}
		batch := b.loadMegatronBatch(g == 0, g == sp.Chunks-1)
		if g == 0 {
			for _, u := range sp.pre {
				x, srcs = b.lowerUnit(u, x, srcs)
			}
		}
		lo, hi := sp.ChunkBlocks(g)
		for i, u := range sp.Blocks[lo:hi] {
			ops, values, params, comm := len(b.P.Ops), len(b.P.Values), len(b.P.Params), len(b.P.Comm)
			x, srcs = b.lowerUnit(u, x, srcs)
			if k == 0 && i == 0 { // room for the chunk's other blocks, as Repeat.Lower reserves it
				b.P.reserve(hi-lo-1, 0, ops, values, params, comm)
			}
		}
		out := StageOut{V: x}
		if g == sp.Chunks-1 {
			for _, u := range sp.post {
				x, srcs = b.lowerUnit(u, x, srcs)
			}
			if m.Vocab > 0 {
				head := len(b.P.Params)
				x = b.headLinear(m, x)
				if m.LogitScale > 0 {
					x = b.scaleLogits(x)
				}
				if m.Tied() && b.embedWeight(m) < 0 { // the embedding is on the first stage
					b.P.Params[head].StageCopy = true
				}
				// An MTP module's head is the output layer (nn.MTP; Megatron's
				// MultiTokenPredictionBlock computes its logits with the
				// model's output_layer), as lowerBody ties it.
				for pi := p0; pi < head; pi++ {
					if b.P.Params[pi].Role == RoleLMHead && b.P.Params[pi].TiedTo < 0 {
						b.P.Params[pi].TiedTo = int32(head)
					}
				}
			}
			c.out = x
			out = StageOut{V: b.megatronLossFunc(b.loss(m, x), batch), Loss: true}
		} else {
			b.stageSend(x)
			c.out = x
		}
		b.dropMegatronBatch(batch)
		b.P.Stage.Outputs = append(b.P.Stage.Outputs, out)
		copies = append(copies, c)
		done()
		r := [2]int{p0, len(b.P.Params)}
		if f, ok := first[g]; ok {
			b.P.Buffers = b.P.Buffers[:bu0] // a module's buffers once, not per micro-batch copy (TE's fp8 workspaces)
			srcs = srcs.keepingBuffers(bu0)
			if f[1]-f[0] != r[1]-r[0] {
				return units.Errorf(m.Name, "internal error: micro-batch copies registered %d and %d parameters", f[1]-f[0], r[1]-r[0])
			}
			for j := 0; j < r[1]-r[0]; j++ {
				t := int32(f[0] + j)
				if tt := b.P.Params[t].TiedTo; tt >= 0 {
					t = tt
				}
				b.P.Params[r[0]+j].TiedTo = t
			}
		} else {
			first[g] = r
			b.P.Stage.Chunks = append(b.P.Stage.Chunks, StageChunk{Chunk: g, Params: r, FirstOp: int32(o0)})
		}
	}
	for i := range b.P.Stage.Chunks {
		c := &b.P.Stage.Chunks[i]
		c.Done = p.MicroBatches()
		for _, g := range st.Chunks {
			if g == c.Chunk {
				c.Done--
			}
		}
		c.Done = max(c.Done, 0)
	}
	if p.Parallel.PPRuntime == "torch" {
		b.torchPipelining(copies, p.MicroBatches(), sp.Chunks)
	}
	return nil
}

// stageBatch is one micro-batch of the data on the first stage, loaded
// when its forward starts.
func (b *Builder) stageBatch(m *Model) Value {
	i := b.AddOp("batch", "batch", nil)
	if startsWithEmbedding(m.Layers) {
		return b.Out(i, "input_ids", []int64{b.Batch, b.Seq}, units.INT64, "micro-batch of token ids")
	}
	dt := b.Prec.Compute
	if b.Prec.Autocast {
		dt = b.Prec.Params
	}
	x := b.Out(i, "inputs", []int64{b.Batch, b.Seq / b.Par.spDiv(), m.inputDim()}, dt, "micro-batch of inputs")
	b.Val(x).Grad = false
	return x
}

// stageRecv is the activation received from the previous stage (it
// requires grad; its gradient is sent back when the backward reaches it).
func (b *Builder) stageRecv(m *Model) Value {
	i := b.AddOp("recv", "recv_forward", nil)
	h := m.stageWidth()
	x := b.Out(i, "received", []int64{b.Batch, b.Seq / b.Par.spDiv(), h}, b.Prec.Compute, "activation received from the previous pipeline stage")
	b.Val(x).Grad = !b.Eval
	n := b.Val(x).Bytes
	b.RecordComm("send_recv", "pp", n, false)
	b.RecordComm("send_recv", "pp", n, true)
	return x
}

// stageSend records the send of a stage's output (its storage is freed
// after the send: it has no consumer in this program).
func (b *Builder) stageSend(x Value) {
	n := b.Val(x).Bytes
	b.RecordComm("send_recv", "pp", n, false)
	b.RecordComm("send_recv", "pp", n, true)
}

// stageWidth is the hidden width between blocks.
func (m *Model) stageWidth() int64 {
	var w int64
	var walk func(ls []Layer)
	walk = func(ls []Layer) {
		for _, l := range ls {
			switch x := l.(type) {
			case *Repeat:
				if d := WidthIn(x); d > 0 && w == 0 {
					w = d
				}
			case *Sequential:
				walk(x.Layers)
			}
		}
	}
	walk(m.Layers)
	if w == 0 {
		w = m.outDim()
	}
	return w
}

// lowerUnit lowers one flattened piece under the module path and
// checkpoint regions it has in the whole model.
// A block is copied from one of srcs when it lowers as that one did
// (block_clone.go); the blocks to copy from next are returned.
func (b *Builder) lowerUnit(u pipeUnit, x Value, srcs blockCopies) (Value, blockCopies) {
	if u.block < 0 {
		defer b.Scope(u.scope())()
		return b.LowerChild(u.layer, x), srcs
	}
	// BlockPath as three scopes: the same module path, without the
	// block's path made on the heap for each block of each program.
	defer b.Scope(u.scope())()
	defer b.Scope(ModuleName(u.rep))()
	defer b.Scope(Itoa(u.block))()
	b.block = int(u.block)
	return b.lowerBlock(u.rep.Block(u.block), x, srcs, b.decoderLayers[u.rep])
}

// lowerModel lowers the whole model, or the plan's pipeline stage.
func (p *Plan) lowerModel(b *Builder) error {
	// Megatron's GPTModel hands its layers the rotary embedding alone; a
	// pipeline stage's micro-batch copies would read one position_ids
	// (each micro-batch's forward makes its own, 8 bytes a token: left out).
	if p.Model.PositionIDs && !b.MegatronKernels() && p.PipeStage == nil {
		b.decoderLayers = decoderRepeats(p.Model)
	}
	if p.PipeStage != nil {
		return p.lowerStage(b)
	}
	if err := p.Model.lower(b); err != nil {
		return err
	}
	return b.unmatchedLoRATargets() // the whole model: a name no linear has is refused
}

// BlockPaths are the module paths of the blocks FSDP wraps as units of
// their own, in model order: every block of every repeat() outside
// another repeat's blocks ("model.layers.5") and the blocks a layer lowers
// itself and lists (BlockLister: "model.visual.blocks.3"), as
// transformers' _no_split_modules lists a vision-language model's vision
// blocks beside its decoder layers and a DeepSeek-style model's dense
// first layers beside its MoE ones (accelerate's transformer_based_wrap),
// and as torchtitan shards every model.layers[i].
func BlockPaths(m *Model) []string {
	var out []string
	walkBlocks(m, func(p string) bool { out = append(out, p); return true })
	return out
}

// FirstBlockPath is BlockPaths(m)[0], "" for a model without blocks,
// without listing the rest.
func FirstBlockPath(m *Model) string {
	first := ""
	walkBlocks(m, func(p string) bool { first = p; return false })
	return first
}

// walkBlocks yields BlockPaths' paths in order until yield returns false.
func walkBlocks(m *Model, yield func(string) bool) {
	var walk func(ls []Layer, scope string) bool
	walk = func(ls []Layer, scope string) bool {
		for _, l := range ls {
			switch x := l.(type) {
			case *Repeat:
				p := JoinName(scope, ModuleName(x))
				for j := int64(0); j < x.Count(); j++ {
					if !yield(JoinName(p, Itoa(j))) {
						return false
					}
				}
			case *Sequential:
				if !walk(x.Layers, JoinName(scope, ModuleName(x))) {
					return false
				}
			case BlockLister:
				for _, p := range x.BlockPaths() {
					if !yield(JoinName(scope, p)) {
						return false
					}
				}
			}
		}
		return true
	}
	walk(m.Layers, "")
}

// BlockLister is a layer that lowers blocks of its own rather than
// through a repeat() (a vision tower's encoder layers): BlockPaths are
// their module paths under the scope the layer is lowered in, the
// classes transformers' _no_split_modules names.
type BlockLister interface {
	BlockPaths() []string
}
