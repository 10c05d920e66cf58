package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Pipeline schedules: which model chunks each stage holds, and how many
// chunk forwards it keeps in flight at its memory peak (the stage replay
// holds those; the time model composes the bubble, timing/pipeline.go).
//
//   - 1f1b and interleaved: Megatron's (pipeline.go). Stage s holds
//     chunks c*pp + s.
//   - zb-h1: zero bubble (Qi et al. 2023, arXiv:2401.10241, ZB-H1; the
//     ZB1P of sail-sg/zero-bubble-pipeline-parallelism): the backward is
//     split into its input-gradient pass B and its weight-gradient pass W,
//     and W is deferred into the bubble. Its activation memory is 1F1B's
//     (the repository's table: "1x"): min(pp - s, m) micro-batches in
//     flight on stage s.
//   - zb-v: the V-shaped zero-bubble schedule (ZBV, the same repository):
//     2 chunks per stage, stage s holding chunk s and chunk 2*pp - 1 - s,
//     so the first stage holds the embedding and the loss; activation
//     memory 1x of 1F1B's first stage on every stage: pp micro-batches
//     through each of its two chunks of half a stage; pipeline
//     communication 2x.
//   - dualpipe: DeepSeek-V3's bidirectional schedule (DeepSeek-AI 2024,
//     arXiv:2412.19437, section 3.2.1 and Table 2): micro-batches enter
//     from both ends, so stage s holds its own stage and the mirrored
//     stage pp - 1 - s: parameters 2x; pp + 1 stage forwards in flight
//     (Table 2's "PP + 1" activation memory), alternating between the two.
//     pp and the micro-batches must be even (section 3.2.1).

// zeroBubble reports whether the schedule splits the backward into B and W.
func (p Parallelism) zeroBubble() bool { return p.Schedule == "zb-h1" || p.Schedule == "zb-v" }

// RankChunks lists the model chunks stage s holds, in the order its
// micro-batch meets them.
func RankChunks(par Parallelism, s int64) []int64 {
	par = par.Norm()
	out := make([]int64, ChunksPerRank(par))
	for c := range out {
		out[c] = RankChunk(par, s, int64(c))
	}
	return out
}

// ChunksPerRank is the number of model chunks each stage of the
// normalized layout par holds.
func ChunksPerRank(par Parallelism) int64 {
	if par.Schedule == "dualpipe" {
		return 2
	}
	return par.VirtualStages
}

// RankChunk is the c-th chunk stage s of the normalized layout par holds
// (RankChunks without a slice, for the search's estimates).
func RankChunk(par Parallelism, s, c int64) int64 {
	pp := par.PP
	switch {
	case par.Schedule == "zb-v" && c == 1:
		return 2*pp - 1 - s
	case par.Schedule == "dualpipe" && c == 1:
		return pp - 1 - s
	}
	return c*pp + s
}

// Inflight is the number of chunk forwards stage s holds at its peak with
// m micro-batches.
func Inflight(par Parallelism, stage, m int64) int64 {
	pp, v := par.PP, par.VirtualStages
	switch par.Schedule {
	case "interleaved":
		warm := (pp-stage-1)*2 + (v-1)*pp
		return min(warm+1, m*v)
	case "zb-v":
		return 2 * min(pp, m)
	case "dualpipe":
		return min(pp+1, m)
	}
	return min(pp-stage, m)
}

// StageChunks lists the chunk of each of the n in-flight forwards of
// stage s.
func StageChunks(par Parallelism, stage, n int64) []int64 {
	pp, v := par.PP, par.VirtualStages
	out := make([]int64, n)
	own := RankChunks(par, stage)
	for k := range n {
		switch par.Schedule {
		case "zb-v", "dualpipe":
			out[k] = own[k%2]
		default:
			c := (k % (pp * v)) / pp
			out[k] = c*pp + stage
		}
	}
	return out
}

// validateSchedule checks the schedule against the layout.
func (par Parallelism) validateSchedule() error {
	switch par.Schedule {
	case "1f1b", "zb-h1":
		if par.VirtualStages > 1 {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("virtual_stages=%d needs schedule=\"interleaved\" or \"zb-v\"", par.VirtualStages)}
		}
	case "interleaved":
		if par.VirtualStages < 2 {
			return &units.Error{Path: "parallel", Msg: "the interleaved schedule needs virtual_stages >= 2", Hint: "virtual_stages is the number of model chunks per GPU (Megatron --num-layers-per-virtual-pipeline-stage)"}
		}
	case "zb-v":
		if par.VirtualStages != 2 {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("the zb-v schedule holds 2 chunks per stage (got virtual_stages=%d)", par.VirtualStages), Hint: "leave virtual_stages unset or pass 2"}
		}
	case "dualpipe":
		if par.VirtualStages > 1 {
			return parallelErr("the dualpipe schedule holds two stages per GPU by itself (got virtual_stages=%d)", par.VirtualStages)
		}
		if par.PP%2 != 0 {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("dualpipe needs an even pp (got pp=%d)", par.PP), Hint: "DualPipe pairs stage s with stage pp-1-s (DeepSeek-V3, section 3.2.1)"}
		}
	default:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("unknown schedule %q (known: 1f1b, interleaved, zb-h1, zb-v, dualpipe)", par.Schedule)}
	}
	if par.Schedule != "1f1b" && par.PP < 2 {
		return parallelErr("the %s schedule needs pp >= 2 (got pp=%d)", par.Schedule, par.PP)
	}
	if (par.Schedule == "zb-v" || par.Schedule == "dualpipe") && (par.FirstStageLayers > 0 || par.LastStageLayers > 0) {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("first_stage_layers and last_stage_layers follow the interleaved chunk order, not %s's", par.Schedule), Hint: "pass stage_layers=[...], one count per model chunk"}
	}
	return nil
}
