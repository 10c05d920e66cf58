package search

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
)

// standInParams are the parameters of a stand-in program for replay's
// inventory of data-parallel collectives (replay/comm.go) and its
// unoverlapped edges (replay/shard_edges.go) under plan p, from a
// profile's parameters a: their element counts, dense or expert,
// trainable or frozen, and where the sharding gathers them, which replay
// reads from their names (and roles, sizes): gathered at a pass's edge
// (FSDP's root unit, ZeRO-3's modules outside the blocks: paramEntry.root,
// edge3) as one parameter named "", the rest as one named in the model's
// first block. A model without blocks has nothing outside its root but
// FSDP1's adapters, wrapped on their own (their role places them), and
// what ZeRO-3 keeps gathered, each too small to be gathered
// (stage3_param_persistence_threshold): those are listed one by one.
// Quantized weights are left out: replay gathers them apart from the
// others (quantComm), and the search prices them so (quantGathers).
func standInParams(p *core.Plan, a paramAgg) []core.ParamInfo {
	in := gathered(p)
	atEdge := func(e paramEntry) bool { return e.quant == "" && in(e) && e.root }
	if replay.ModeOf(p) == replay.DistZeRO {
		atEdge = func(e paramEntry) bool { return e.quant == "" && in(e) && e.edge3 }
	}
	offEdge := func(e paramEntry) bool { return e.quant == "" && in(e) && !e.root }
	if replay.ModeOf(p) == replay.DistZeRO {
		offEdge = func(e paramEntry) bool { return e.quant == "" && in(e) && !e.edge3 }
	}
	var inBlock string
	if b := core.FirstBlockPath(p.Model); b != "" {
		inBlock = b + ".weight"
	}
	var ps []core.ParamInfo
	add := func(edge bool, numel int64, trainable, expert bool) {
		q := core.ParamInfo{Numel: numel, Trainable: trainable, TiedTo: -1}
		if !edge {
			q.Name = inBlock
		}
		switch {
		case expert:
			q.Role = "expert_fast"
		case !edge && inBlock == "":
			q.Role = core.RoleLoRA // off the edge without a block: FSDP1's adapter units (replay's unitKey)
		}
		ps = append(ps, q)
	}
	for _, trainable := range []bool{true, false} {
		dense, expert := a.numelIn(trainable, atEdge)
		if dense > 0 {
			add(true, dense, trainable, false)
		}
		if expert > 0 {
			add(true, expert, trainable, true)
		}
		if inBlock == "" {
			for _, e := range a {
				if e.trainable == trainable && offEdge(e) {
					for range e.n {
						add(false, e.numel, trainable, e.expert)
					}
				}
			}
			continue
		}
		dense, expert = a.numelIn(trainable, offEdge)
		if dense > 0 {
			add(false, dense, trainable, false)
		}
		if expert > 0 {
			add(false, expert, trainable, true)
		}
	}
	return ps
}

// quantGathers is the step's gathers of a's quantized weights under d's
// sharding, as replay's quantComm counts a program's: each weight's
// bytes from its scheme and shape (QuantGatherBytes).
func quantGathers(d interface {
	QuantGatherBytes(*core.ParamInfo) int64
	QuantGathers(int64) []core.CommRecord
}, p *core.Plan, a paramAgg) []core.CommRecord {
	in := gathered(p)
	var b int64
	for _, e := range a {
		if e.quant == "" || !in(e) {
			continue
		}
		q := core.ParamInfo{Quant: e.quant, Shape: e.shape, Numel: e.numel, TiedTo: -1}
		if e.expert {
			q.Role = "expert_fast"
		}
		b += e.n * d.QuantGatherBytes(&q)
	}
	return d.QuantGathers(b)
}

// gathered is the rule of the stand-in's parameters under plan p: what
// the sharding gathers of a profile's parameters as replay's gathers do
// (replay's ungathered): ZeRO-3 and FSDP2 none of those no op reads,
// FSDP1 those it flattens into a unit that runs, the other shardings
// every one (their flat buffers hold them all).
func gathered(p *core.Plan) func(paramEntry) bool {
	par := p.Parallel.Norm()
	switch mode := replay.ModeOf(p); {
	case mode == replay.DistFSDP && par.FSDPVersion == 1:
		return func(e paramEntry) bool { return !e.unread || e.folded }
	case mode == replay.DistFSDP, mode == replay.DistZeRO && par.Zero == 3:
		return func(e paramEntry) bool { return !e.unread }
	}
	return func(paramEntry) bool { return true }
}
