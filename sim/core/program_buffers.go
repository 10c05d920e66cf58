package core

import "sync"

// ProgramBuffers keeps the lists (ops, values, parameters, collectives) of
// programs their owner no longer reads, for its next lowering to fill
// instead of allocating lists of its own (LowerProgramInto). A pipeline's
// stages lower programs of similar sizes one after another: one worker
// replaying them reuses one set of lists, and the garbage collector sees
// a fraction of the bytes. A ProgramBuffers belongs to one goroutine (the
// caller makes one per worker; there is no shared pool).
type ProgramBuffers struct {
	// Names, when set, keeps copied blocks' names for every lowering
	// into these buffers (and any other sharing the table): NameTable.
	Names *NameTable
	// Recall, when set, has a lowering into these buffers take the last
	// one's names where they read the same (cloneArena's recall): for
	// an owner that lowers programs named alike one after another (the
	// search's profiles), not one whose programs share few names (a
	// pipeline's stages, each under its own "stageN" path), where the
	// list of names would cost more than it saves.
	Recall bool
	// Templates, when set, keeps blocks lowered into these buffers for
	// later lowerings sharing it to copy (block_templates.go).
	Templates *BlockTemplates

	ops    []OpInfo
	values []ValueInfo
	params []ParamInfo
	comm   []CommRecord
	// scratch is where a block copy's names are written before they are
	// kept (cloneNames): a lowering's scratch grew from nothing to its
	// largest block's names at each lowering (a tenth of the search's
	// bytes), the next lowering starts on it.
	scratch []byte
	cuts    []int32 // the same for a block's name template
	// arena is the last lowering's name and list slabs (cloneArena), the
	// next lowering writes on past what it wrote: a slab's bytes are
	// never written twice, so the strings and lists carved before stay
	// as they are. Each lowering began slabs of its own from the
	// smallest, and left their tails unwritten (the search's profiles
	// lower tens of thousands of small programs).
	arena cloneArena
	// built is the last lowering's Builder, emptied but for its maps
	// (emptied too): the next lowering's, which would otherwise
	// allocate a Builder of 736 bytes and those maps afresh
	// (a tenth of the bytes of the search's lowerings of small
	// programs). Nothing keeps a Builder past its lowering.
	built *Builder
	// out is the programs lowered into these buffers and not recycled
	// yet, as far as it holds them (lost: one did not fit). Once none
	// is out, the arena's lists of values and parameters (a block
	// copy's ins, outs and saves) are carved from the start of its
	// latest slabs again (rewind), as a recycled program's lists are
	// reused: nothing reads them any more. The programs' names are
	// never written again: a report keeps them.
	out  [4]*Program
	lost bool
	// Replay is the replay's own lists (sim/replay.Scratch), kept with
	// the lists of the programs it replays for the next replay by the
	// same goroutine; core reads nothing of it.
	Replay any
	// Timing is the time model's own lists (sim/timing's moduleRows),
	// kept likewise; core reads nothing of it.
	Timing any
	// Aside is a second set of lists, kept likewise, for a program its
	// owner lowers while the one in these lists is still read (sim: a
	// pipeline stage's micro-batch program, which the time model lowers
	// beside the stage's). Taken from the owner's pool instead, a
	// micro-batch program's small lists went back to it and a stage
	// lowered into them next regrew them.
	Aside *ProgramBuffers
}

// Recycle takes p's lists for the next lowering and empties p: p must not
// be read any more, by its caller or by anything it was handed to (a
// report keeps no list of a program, only names and shapes, which are
// not reused). A nil b or p recycles nothing.
func (b *ProgramBuffers) Recycle(p *Program) {
	if b == nil || p == nil {
		return
	}
	keep := func(have, next int) bool { return next > have }
	if keep(cap(b.ops), cap(p.Ops)) {
		b.ops = p.Ops[:0]
	}
	if keep(cap(b.values), cap(p.Values)) {
		b.values = p.Values[:0]
	}
	if keep(cap(b.params), cap(p.Params)) {
		b.params = p.Params[:0]
	}
	if keep(cap(b.comm), cap(p.Comm)) {
		b.comm = p.Comm[:0]
	}
	*p = Program{}
	b.recycled(p)
}

// lowered records p, just lowered into b's lists and arena, as out.
func (b *ProgramBuffers) lowered(p *Program) {
	if b == nil {
		return
	}
	for i, q := range b.out {
		if q == nil {
			b.out[i] = p
			return
		}
	}
	b.lost = true // its lists stay unwritten for as long as b lives
}

// recycled records p as no longer out, and rewinds the arena's lists
// once no program is.
func (b *ProgramBuffers) recycled(p *Program) {
	none := true
	for i, q := range b.out {
		if q == p {
			b.out[i] = nil
		}
		none = none && b.out[i] == nil
	}
	if none && !b.lost {
		b.arena.vals.rewind()
		b.arena.params.rewind()
	}
}

// take starts prog's lists on b's, which prog then owns (b keeps none).
func (b *ProgramBuffers) take(prog *Program) {
	if b == nil {
		return
	}
	prog.Ops, prog.Values, prog.Params, prog.Comm = b.ops, b.values, b.params, b.comm
	*b = ProgramBuffers{Names: b.Names, Recall: b.Recall, Templates: b.Templates, scratch: b.scratch, cuts: b.cuts, arena: b.arena, built: b.built,
		out: b.out, lost: b.lost, Replay: b.Replay, Timing: b.Timing, Aside: b.Aside}
}

// builder returns the Builder of b's last lowering, which b gives up
// (keepBuilder hands it back), or a new one (always from a nil b).
func (b *ProgramBuffers) builder() *Builder {
	if b == nil || b.built == nil {
		return new(Builder)
	}
	built := b.built
	b.built = nil
	return built
}

// keepBuilder empties bd, a finished lowering's Builder, for b's next
// lowering: it keeps no program, layer or name, only its maps' room
// (ModuleName's, TE's fp8 inputs, autocast's head casts, Megatron's fused
// inputs: each made when first needed, and read only for what this
// lowering put in), its scope list's room and its Scope func (bound to
// bd).
func (b *ProgramBuffers) keepBuilder(bd *Builder) {
	clear(bd.names)
	clear(bd.taken)
	clear(bd.teInput)
	clear(bd.headCast)
	clear(bd.fusedInputs)
	*bd = Builder{names: bd.names, taken: bd.taken, teInput: bd.teInput, headCast: bd.headCast, fusedInputs: bd.fusedInputs,
		scopes: bd.scopes[:0], unscope: bd.unscope}
	b.built = bd
}

// untaken hands back to b the lists of prog, just lowered, that nothing
// was added to and that a lowering without b leaves nil (no room asked
// for them), and sets them nil: the program is the one LowerProgramSized
// makes, nil lists included.
func (b *ProgramBuffers) untaken(prog *Program, room ProgramSize) {
	if b == nil {
		return
	}
	if len(prog.Ops) == 0 && room.Ops == 0 {
		b.ops, prog.Ops = prog.Ops, nil
	}
	if len(prog.Values) == 0 && room.Values == 0 {
		b.values, prog.Values = prog.Values, nil
	}
	if len(prog.Params) == 0 && room.Params == 0 {
		b.params, prog.Params = prog.Params, nil
	}
	if len(prog.Comm) == 0 {
		b.comm, prog.Comm = prog.Comm, nil
	}
}

// LowerProgramInto is LowerProgramSized, its lists started on those b
// keeps (b gives them up; Recycle hands them back): the same program,
// without allocating lists a recycled program had room for. A nil b
// allocates as LowerProgramSized does.
func (p *Plan) LowerProgramInto(room ProgramSize, b *ProgramBuffers) (*Program, error) {
	return p.lowerProgram(room, b, nil)
}

// LowerProgramUnder is LowerProgramInto that stops, with stop's error,
// once stop returns one (Options.Stopped: the caller's context), looked
// at before each member and repeated block.
func (p *Plan) LowerProgramUnder(room ProgramSize, b *ProgramBuffers, stop func() error) (*Program, error) {
	return p.lowerProgram(room, b, stop)
}

// BufferPool keeps the ProgramBuffers of finished evaluations for the
// next ones (a search's replays, each lowering programs as large as the
// last): Get takes one, Put gives it back. It is safe for concurrent
// use; its owner (a search run) drops it when done, there is no
// package-level pool. It holds as many buffers as were in use at once.
type BufferPool struct {
	mu   sync.Mutex
	free []*ProgramBuffers
}

// Get returns buffers for one goroutine's lowerings, names kept in
// names: the pool's, or new ones (always new from a nil pool).
func (p *BufferPool) Get(names *NameTable) *ProgramBuffers {
	if p != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if n := len(p.free); n > 0 {
			b := p.free[n-1]
			p.free[n-1] = nil
			p.free = p.free[:n-1]
			b.Names = names
			return b
		}
	}
	return &ProgramBuffers{Names: names}
}

// Put hands b back to the pool (after its last program was recycled or
// dropped); a nil pool or b keeps nothing.
func (p *BufferPool) Put(b *ProgramBuffers) {
	if p == nil || b == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, b)
}
