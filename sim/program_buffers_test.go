package sim

import (
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/timing"
)

// A program lowered into the lists of programs recycled before it
// (core.ProgramBuffers, as a pipeline's worker lowers its stages one
// after another) is the program a fresh lowering makes, element for
// element and nil list for nil list, with room asked for or not,
// whichever programs, larger or smaller, went before, its names recalled
// from the program before or not (Recall); and a recycled
// program is emptied, so a caller that still read it would fail rather
// than read the next program's ops.
func TestLowerProgramIntoEqualsLowerProgram(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	var plans []*core.Plan
	for _, par := range []core.Parallelism{{PP: 3}, {PP: 2, Schedule: "interleaved", VirtualStages: 3},
		{PP: 2, TP: 2, SequenceParallel: true, DistributedOptimizer: true, DP: 2}, {PP: 4, EmbeddingSlot: true, LossSlot: true}} {
		p := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
		p.Parallel, p.GradAccum = par, 4
		stages, err := stagePlans(p)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, stages...)
	}
	one := testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB")
	chunked := testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB")
	chunked.LossChunks = 4 // autocast's one cast of the head's weight for its chunks (Builder.headCast)
	te := testmodels.LlamaPlan(llama, 2, 64, "megatron", "none", "H100-80GB")
	te.Float8 = core.Float8{Scaling: "delayed"} // TE's fp8 inputs, one per fused linear (Builder.teInput)
	// chunked and te are each lowered twice into one buffers (orders of 4)
	plans = append(plans, one, chunked, te, one, chunked, te)
	for _, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}, {0, 1, 2, 3, -1}, {3, 2, 1, 0, -1}} { // the lists grow, or shrink; -1: recall names
		bufs := &core.ProgramBuffers{Recall: order[len(order)-1] < 0}
		if bufs.Recall {
			order = order[:len(order)-1]
		}
		for _, o := range order {
			for i := o; i < len(plans); i += len(order) {
				p := plans[i]
				want, err := p.LowerProgram()
				if err != nil {
					t.Fatal(err)
				}
				var room core.ProgramSize // the search's profiles ask for room
				if i%2 == 1 {
					room = want.Size()
					if want, err = p.LowerProgramSized(room); err != nil {
						t.Fatal(err)
					}
				}
				got, err := p.LowerProgramInto(room, bufs)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("plan %d (%s, stage %v): the program lowered into recycled lists differs", i, p.Parallel, p.PipeStage != nil)
				}
				bufs.Recycle(got)
				if len(got.Ops) != 0 || len(got.Values) != 0 || len(got.Params) != 0 {
					t.Fatalf("plan %d: a recycled program still lists %d ops", i, len(got.Ops))
				}
			}
		}
	}
}

// Programs lowered with a name table (core.NameTable, as a search's
// lowerings share one) are the programs lowered without, whether the
// table already holds their copied blocks' names, is full, or is shared
// by programs of other layouts; and a second lowering takes its copies'
// names from the table instead of writing them again (the point of it).
func TestLowerProgramWithNameTable(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	var plans []*core.Plan
	for _, par := range []core.Parallelism{{PP: 3}, {PP: 2, Schedule: "interleaved", VirtualStages: 3}, {PP: 2, TP: 2, SequenceParallel: true, DP: 2}} {
		p := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
		p.Parallel, p.GradAccum = par, 4
		stages, err := stagePlans(p)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, stages...)
	}
	plans = append(plans, testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB"))
	for _, tc := range []struct {
		name  string
		table *core.NameTable
	}{{"room for all", &core.NameTable{}}, {"full", core.NewNameTable(1)}} {
		bufs := &core.ProgramBuffers{Names: tc.table}
		for round := range 2 {
			for i, p := range plans {
				want, err := p.LowerProgram()
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.LowerProgramInto(core.ProgramSize{}, bufs)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, round %d, plan %d: the program lowered with a name table differs", tc.name, round, i)
				}
				if round == 1 {
					again, err := p.LowerProgramInto(core.ProgramSize{}, &core.ProgramBuffers{Names: tc.table})
					if err != nil {
						t.Fatal(err)
					}
					shared := 0
					for k := range got.Ops {
						if got.Ops[k].Block > 1 && unsafe.StringData(got.Ops[k].Name) == unsafe.StringData(again.Ops[k].Name) {
							shared++
						}
					}
					if room := tc.name == "room for all"; room != (shared > 0) {
						t.Fatalf("%s, plan %d: %d copied ops' names shared by two lowerings", tc.name, i, shared)
					}
				}
				bufs.Recycle(got)
			}
		}
	}
}

// A lowering into buffers that recall (ProgramBuffers.Recall, as the
// search's profiles lower) takes the last lowering's names of its
// uncopied layers where they read the same, also past the ops one
// layout has and the other not: lowered after a plan at tp 2 with
// sequence parallelism (its gathers and reduce-scatters), and after
// itself, a plan is the fresh program and every uncopied op whose name
// the last lowering had shares its string, bytes and all (all but the
// loss's two, which tp 2 names otherwise). Without Recall only the two
// names that are the model's own strings ("embed_tokens", "lm_head")
// and the three of Megatron's batch ops, constants ("megatron_batch"
// loaded and dropped, "loss_func"; megatron_batch.go), are shared.
func TestLoweringsIntoOneBuffersShareNames(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	p := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
	other := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
	other.Parallel = core.Parallelism{TP: 2, SequenceParallel: true, DP: 2}
	want, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		before *core.Plan // lowered into the buffers first
		recall bool
		shared int // uncopied ops whose names are the last lowering's
	}{{"after itself", p, true, 23}, {"after tp 2", other, true, 21}, {"after itself, no recall", p, false, 5}} {
		bufs := &core.ProgramBuffers{Recall: tc.recall}
		last, err := tc.before.LowerProgramInto(core.ProgramSize{}, bufs)
		if err != nil {
			t.Fatal(err)
		}
		lastNames := map[*byte]bool{}
		for _, op := range last.Ops {
			lastNames[unsafe.StringData(op.Name)] = true
		}
		got, err := p.LowerProgramInto(core.ProgramSize{}, bufs)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the program differs from a fresh lowering", tc.name)
		}
		shared := 0
		for _, op := range got.Ops {
			if op.Block <= 1 && lastNames[unsafe.StringData(op.Name)] {
				shared++
			}
		}
		if shared != tc.shared {
			t.Errorf("%s: %d uncopied ops' names shared with the last lowering, want %d", tc.name, shared, tc.shared)
		}
	}
}

// A pipelined plan evaluated with a search's buffer pool and name table
// (each stage's micro-batch program lowered into the pool's lists for
// the time model, timing.StepTimeIn, and handed back) reports what it
// reports without them, field for field, however often the pool's lists
// were used before (a list handed back while the time model still read
// it would change or break the report: Recycle empties the program).
func TestStageTimeWithBuffersEqualsWithout(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	var plans []*core.Plan
	for _, par := range []core.Parallelism{{PP: 3}, {PP: 2, Schedule: "interleaved", VirtualStages: 3},
		{PP: 2, TP: 2, SequenceParallel: true, DistributedOptimizer: true, DP: 2}, {PP: 4, EmbeddingSlot: true, LossSlot: true}} {
		p := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
		p.Parallel, p.GradAccum = par, 8
		plans = append(plans, p)
	}
	opts := core.Options{Buffers: &core.BufferPool{}, Names: &core.NameTable{}}
	for round := range 2 {
		for i, p := range plans {
			want, err := Evaluate(p, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Evaluate(p, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, plan %d (%s): the report with a buffer pool differs", round, i, p.Parallel)
			}
		}
	}
}

// Lowerings into one ProgramBuffers write their names and lists on the
// slabs the last one left (its arena): an earlier program, still read
// (a report keeps its names), is unchanged by the lowerings after it.
func TestLoweringsIntoOneBuffersKeepEarlierPrograms(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	var plans []*core.Plan
	for _, par := range []core.Parallelism{{PP: 3}, {PP: 2, Schedule: "interleaved", VirtualStages: 3}} {
		p := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
		p.Parallel, p.GradAccum = par, 4
		stages, err := stagePlans(p)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, stages...)
	}
	plans = append(plans, testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB"))
	bufs := &core.ProgramBuffers{}
	var wants, gots []*core.Program
	for _, p := range plans {
		want, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.LowerProgramInto(core.ProgramSize{}, bufs) // not recycled: kept, as a report keeps names
		if err != nil {
			t.Fatal(err)
		}
		wants, gots = append(wants, want), append(gots, got)
	}
	for i := range plans {
		if !reflect.DeepEqual(gots[i], wants[i]) {
			t.Fatalf("plan %d: a program lowered into shared slabs changed after the lowerings that followed it", i)
		}
	}
}

// Lowerings into one ProgramBuffers, some programs recycled and some
// kept (a report's), carve their block copies' value lists from the
// arena's slabs: once no program lowered into them is out, the next
// lowering writes them from the start again (the recycled program's
// lists, as its op list, are reused), and a program still out is never
// written over, however many were lowered and recycled after it.
func TestRecycledProgramsListsReused(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	var plans []*core.Plan
	for _, par := range []core.Parallelism{{PP: 3}, {PP: 2, TP: 2, SequenceParallel: true, DP: 2}} {
		p := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
		p.Parallel, p.GradAccum = par, 4
		stages, err := stagePlans(p)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, stages...)
	}
	plans = append(plans, testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB"))
	copied := func(prog *core.Program) *core.Value { // the last block's first input list: a copy's (each program holds two blocks or more)
		var last int32
		for _, op := range prog.Ops {
			last = max(last, op.Block)
		}
		for _, op := range prog.Ops {
			if op.Block == last && len(op.In) > 0 {
				return unsafe.SliceData(op.In)
			}
		}
		t.Fatal("no block")
		return nil
	}
	for _, keep := range [][]bool{{false, false}, {true, false}, {true, true, true, true, true, false}} {
		bufs := &core.ProgramBuffers{}
		var kept, wants []*core.Program
		for round := range 2 {
			for i, p := range plans {
				want, err := p.LowerProgram()
				if err != nil {
					t.Fatal(err)
				}
				got, err := p.LowerProgramInto(core.ProgramSize{}, bufs)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("keep %v, plan %d: the program differs from a fresh lowering", keep, i)
				}
				if k := round*len(plans) + i; k < len(keep) && keep[k] {
					kept, wants = append(kept, got), append(wants, want)
					continue
				}
				bufs.Recycle(got)
				// Lowered again and recycled, a few times: once a lowering's
				// lists fit in the latest slab (each new slab doubles), the next
				// lowering's are written on them.
				reused := false
				var last *core.Value
				for range 6 {
					again, err := p.LowerProgramInto(core.ProgramSize{}, bufs)
					if err != nil {
						t.Fatal(err)
					}
					at := copied(again)
					reused = reused || at == last
					last = at
					bufs.Recycle(again)
				}
				// Four programs out at most are followed (ProgramBuffers.out);
				// past that none of the lists is written again either.
				if reused != (len(kept) == 0) {
					t.Fatalf("keep %v, plan %d: lists reused %v with %d programs kept", keep, i, reused, len(kept))
				}
			}
		}
		for i := range kept {
			if !reflect.DeepEqual(kept[i], wants[i]) {
				t.Fatalf("keep %v: kept program %d changed after the lowerings that followed it", keep, i)
			}
		}
	}
	// Five programs out, the four followed recycled: the fifth is still
	// out, and the lowerings after it write on other lists.
	bufs := &core.ProgramBuffers{}
	var out []*core.Program
	for _, p := range plans[:5] {
		prog, err := p.LowerProgramInto(core.ProgramSize{}, bufs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, prog)
	}
	for _, prog := range out[:4] {
		bufs.Recycle(prog)
	}
	want, err := plans[4].LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		again, err := p.LowerProgramInto(core.ProgramSize{}, bufs)
		if err != nil {
			t.Fatal(err)
		}
		bufs.Recycle(again)
	}
	if !reflect.DeepEqual(out[4], want) {
		t.Fatal("the fifth program out changed after the lowerings that followed it")
	}
}

// Ops priced in one timing.Prices, program after program (larger, then
// smaller: its lists are reused, never cleared by a new allocation),
// cost what timing.PriceOps prices them at on lists of its own, and
// their collectives sum as timing.SumCommOf sums them (Prices.SumCommOf;
// at tp 2 some hide behind GEMMs).
func TestPricesReusedEqualPriceOps(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	var plans []*core.Plan
	for _, par := range []core.Parallelism{{PP: 3}, {PP: 2, TP: 2, SequenceParallel: true, DistributedOptimizer: true, DP: 2}} {
		p := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
		p.Parallel, p.GradAccum = par, 4
		stages, err := stagePlans(p)
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, stages...)
	}
	tp2 := len(plans) - 1 // the last stage at tp 2: Megatron's asynchronous backward (SumCommOf's Hide)
	ub := testmodels.LlamaPlan(llama, 2, 64, "megatron", "full", "H100-80GB")
	ub.Parallel, ub.GradAccum = core.Parallelism{TP: 2, SequenceParallel: true, TPCommOverlap: true, DP: 2}, 4 // userbuffers: the forward's too
	plans = append(plans, ub)
	compiled := testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB")
	compiled.Compile = core.Compile{Blocks: true} // Inductor's kernels, with megatron's the pricer's fused dispatch
	plans = append(plans, testmodels.LlamaPlan(llama, 2, 64, "bf16-mixed", "none", "H100-80GB"), compiled)
	progs := make([]*core.Program, len(plans))
	for i, p := range plans {
		var err error
		if progs[i], err = p.LowerProgram(); err != nil {
			t.Fatal(err)
		}
	}
	var prices timing.Prices
	for _, backwards := range []bool{false, true} {
		for k := range plans {
			i := k
			if backwards {
				i = len(plans) - 1 - k
			}
			want := timing.PriceOps(progs[i], plans[i])
			got := prices.Of(progs[i], plans[i])
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("plan %d: prices in reused lists differ from PriceOps'", i)
			}
			sums := prices.SumCommOf(progs[i], plans[i], got)
			if want := timing.SumCommOf(progs[i], plans[i], want); !reflect.DeepEqual(sums, want) {
				t.Fatalf("plan %d: collectives summed in reused lists differ from SumCommOf's:\n%+v\n%+v", i, sums, want)
			}
			if i == tp2 && !slices.ContainsFunc(sums, func(c timing.CommSum) bool { return c.Hide > 0 }) {
				t.Fatalf("plan %d: no collective of tp 2 runs beside a GEMM", i)
			}
		}
	}
}

// Replays made in a search's pooled lists (replay.Scratch, kept with each
// worker's core.ProgramBuffers: the Megatron first step's and the steady
// step's tensors and per-value state, handed back after each replay)
// report what replays in lists of their own report: whole plans, with and
// without a pipeline or a first step, larger and smaller one after
// another, and replays stopped at a limit (EvaluateBelow) before the
// next, in both orders and twice over.
func TestReplaysInPooledListsEqualReplaysWithout(t *testing.T) {
	llama := testmodels.Llama(256, 6, 8, 4, 704, 1000, "flash")
	wide := testmodels.Llama(512, 8, 8, 4, 1408, 1000, "flash")
	var plans []*core.Plan
	for _, tc := range []struct {
		m    *core.Model
		prec string
		par  core.Parallelism
	}{
		{llama, "megatron", core.Parallelism{PP: 3}},
		{wide, "megatron", core.Parallelism{PP: 2, TP: 2, SequenceParallel: true, DistributedOptimizer: true, DP: 2}},
		{llama, "megatron", core.Parallelism{TP: 2, SequenceParallel: true, DistributedOptimizer: true, DP: 4}},
		{wide, "bf16-mixed", core.Parallelism{DP: 4, Zero: 1}},
		{llama, "bf16-mixed", core.Parallelism{}},
	} {
		p := testmodels.LlamaPlan(tc.m, 2, 64, tc.prec, "full", "H100-80GB")
		p.Parallel, p.GradAccum = tc.par, 4
		plans = append(plans, p)
	}
	opts := core.Options{Buffers: &core.BufferPool{}, Names: &core.NameTable{}}
	for round := range 4 {
		for k := range plans {
			i := k
			if round%2 == 1 {
				i = len(plans) - 1 - k
			}
			p := plans[i]
			want, err := Evaluate(p, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Evaluate(p, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, plan %d (%s, %s): the report replayed in pooled lists differs", round, i, p.Precision.Name, p.Parallel)
			}
			// A limit halfway to the plan's memory stops its replay (its
			// lists go back to the pool before the next replay takes them).
			limit := want.DeviceUsed / 2
			stopped, err := EvaluateBelow(p, opts, limit, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			alone, err := EvaluateBelow(p, core.Options{}, limit, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(stopped, alone) {
				t.Fatalf("round %d, plan %d: EvaluateBelow under %d bytes differs with pooled lists", round, i, limit)
			}
		}
	}
}

// The activations held for backward, marked program after program in one
// replay.SavedScratch (larger, then smaller; checkpointing with regions
// and without), are SavedAtForwardEnd's marks with lists of its own.
func TestSavedAtForwardEndInScratch(t *testing.T) {
	var progs []*core.Program
	var plans []*core.Plan
	for _, ckpt := range []string{"full", "none", "selective", "op", "full"} {
		for _, layers := range []int64{6, 2} {
			p := testmodels.LlamaPlan(testmodels.Llama(256, layers, 8, 4, 704, 1000, "flash"), 2, 64, "bf16-mixed", ckpt, "H100-80GB")
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			progs, plans = append(progs, prog), append(plans, p)
		}
	}
	var s replay.SavedScratch
	for i, prog := range progs {
		want := replay.SavedAtForwardEnd(prog, plans[i])
		if got := replay.SavedAtForwardEndIn(prog, plans[i], &s); !reflect.DeepEqual(got, want) {
			t.Fatalf("program %d (%s): marks in reused lists differ", i, plans[i].Checkpoint.Mode)
		}
	}
}
