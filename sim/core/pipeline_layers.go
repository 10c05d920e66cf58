package core

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// How many of the repeated blocks each pipeline model chunk holds. Chunk
// g runs on stage g mod pp (virtual stage g div pp), and the chunks take
// the blocks in order. The splits, by the layout's options:
//
//   - even (the default): n/(pp*v) blocks per chunk; an error otherwise.
//   - Megatron's uneven first and last stage (--decoder-first-pipeline-
//     num-layers, --decoder-last-pipeline-num-layers;
//     megatron/core/transformer/transformer_block.py
//     get_num_layers_to_build): the first (last) stage holds the given
//     number of blocks, the stages between share the rest evenly, and a
//     stage's blocks are split evenly over its v chunks.
//   - Megatron's --account-for-embedding-in-pipeline-split and
//     --account-for-loss-in-pipeline-split: the embedding and the loss
//     count as one block each in the even split, and the first chunk of
//     the first stage (the last chunk of the last stage) holds one block
//     fewer. Llama 3 405B (Dubey et al. 2024, section 3.3.2): 126 layers
//     on 16 stages of 8 chunks, "the first model chunk on the first stage
//     has only the embedding, and the last model chunk on the last stage
//     has only output projection and loss calculation".
//   - torchtitan's generated split points (torchtitan/parallelisms/
//     pipelining_utils.py generate_split_points, December 2024): b =
//     n div (pp*v) blocks for the first chunk, b+1 for the following
//     chunks while the remainder lasts, b for the rest; the last chunk
//     takes what is left.
//   - an explicit list, one count per chunk (torchtitan's split points,
//     Megatron's pipeline_model_parallel_layout).
//
// A chunk may hold no block only where it holds the embedding (the first)
// or the output layer and the loss (the last).

// ChunkSplit is what of a layout ChunkLayers reads besides an explicit
// StageLayers list: two layouts without one and with equal ChunkSplits
// split the same number of blocks alike (the search shares their splits).
type ChunkSplit struct {
	PP, VirtualStages, FirstStageLayers, LastStageLayers int64
	StageSplit                                           string
	EmbeddingSlot, LossSlot                              bool
}

// Split is p's ChunkSplit, normalized as ChunkLayers normalizes it.
func (p Parallelism) Split() ChunkSplit {
	par := p.Norm()
	return ChunkSplit{PP: par.PP, VirtualStages: par.VirtualStages, FirstStageLayers: par.FirstStageLayers,
		LastStageLayers: par.LastStageLayers, StageSplit: par.StageSplit, EmbeddingSlot: par.EmbeddingSlot, LossSlot: par.LossSlot}
}

// ChunkLayers is the number of blocks of each model chunk, in chunk
// order, for a model of n repeated blocks.
func (p Parallelism) ChunkLayers(n int64, model string) ([]int64, error) {
	return p.chunkLayersIn(nil, n, model)
}

// chunkLayersIn is ChunkLayers written into dst's room when it has
// enough (a plan's check, which reads only the error, passes a local
// array: the search checks its layouts by the hundred thousand).
func (p Parallelism) chunkLayersIn(dst []int64, n int64, model string) ([]int64, error) {
	par := p.Norm()
	pp, v := par.PP, par.VirtualStages
	chunks := pp * v
	errf := func(hint, format string, args ...any) error {
		return &units.Error{Path: model, Msg: fmt.Sprintf(format, args...), Hint: hint}
	}
	var out []int64
	switch {
	case len(par.StageLayers) > 0:
		if int64(len(par.StageLayers)) != chunks {
			return nil, errf("one count per model chunk, in chunk order (chunk g runs on stage g mod pp)",
				"stage_layers has %d counts for %d model chunks (pp=%d x virtual_stages=%d)", len(par.StageLayers), chunks, pp, v)
		}
		out = append(dst[:0], par.StageLayers...)
	case par.StageSplit == "torchtitan":
		if chunks > n {
			return nil, errf("", "%d model chunks for %d layers: torchtitan needs at least one layer per chunk", chunks, n)
		}
		base, extra := n/chunks, n%chunks
		out = sized(dst, chunks)
		used := int64(0)
		for g := range chunks - 1 {
			out[g] = base
			if g > 0 && extra > 0 {
				out[g]++
				extra--
			}
			used += out[g]
		}
		out[chunks-1] = n - used
	case par.FirstStageLayers > 0 || par.LastStageLayers > 0:
		if par.EmbeddingSlot || par.LossSlot {
			return nil, errf("Megatron asserts the same (get_num_layers_to_build)", "first_stage_layers/last_stage_layers cannot be combined with account_for_embedding/account_for_loss")
		}
		rest, left := n, pp
		for _, k := range []int64{par.FirstStageLayers, par.LastStageLayers} {
			if k > 0 {
				rest -= k
				left--
			}
		}
		if rest < 0 || (left == 0 && rest != 0) {
			return nil, errf("", "first_stage_layers=%d and last_stage_layers=%d do not add up to the %d layers over pp=%d", par.FirstStageLayers, par.LastStageLayers, n, pp)
		}
		middle := int64(0)
		if left > 0 {
			if rest%left != 0 {
				return nil, errf("Megatron requires the layers left over to divide evenly over the stages between the first and the last",
					"the %d layers left for the %d middle stages do not divide evenly", rest, left)
			}
			middle = rest / left
		}
		perStage := func(s int64) int64 {
			switch {
			case s == 0 && par.FirstStageLayers > 0:
				return par.FirstStageLayers
			case s == pp-1 && par.LastStageLayers > 0:
				return par.LastStageLayers
			}
			return middle
		}
		out = sized(dst, chunks)
		for s := range pp {
			k := perStage(s)
			if k%v != 0 {
				return nil, errf("each stage's layers are split evenly over its virtual_stages chunks", "stage %d's %d layers do not divide over virtual_stages=%d", s, k, v)
			}
			for c := range v {
				out[c*pp+s] = k / v
			}
		}
	default:
		total := n
		if par.EmbeddingSlot {
			total++
		}
		if par.LossSlot {
			total++
		}
		if total%chunks != 0 {
			what := fmt.Sprintf("pp=%d", pp)
			if v > 1 {
				what = fmt.Sprintf("pp*virtual_stages = %d", chunks)
			}
			slots := ""
			if total != n {
				slots = fmt.Sprintf(" (%d with the embedding and loss slots)", total)
			}
			return nil, errf("uneven stages: first_stage_layers=/last_stage_layers= (Megatron), account_for_embedding=/account_for_loss=, stage_layers=[...] or stage_layers=\"torchtitan\"",
				"%s does not divide %d layers%s", what, n, slots)
		}
		out = sized(dst, chunks)
		for g := range out {
			out[g] = total / chunks
		}
		if par.EmbeddingSlot {
			out[0]--
		}
		if par.LossSlot {
			out[chunks-1]--
		}
	}
	var sum int64
	for g, k := range out {
		stage, chunk := int64(g)%pp, int64(g)/pp
		if k < 0 {
			return nil, errf("", "pipeline stage %d (chunk %d) would hold %d layers", stage, chunk, k)
		}
		if k == 0 && g != 0 && g != len(out)-1 {
			return nil, errf("only the first chunk (with the embedding) and the last (with the output layer and the loss) may hold no layer",
				"pipeline stage %d (chunk %d of %d) has no layer", stage, chunk, v)
		}
		sum += k
	}
	if sum != n {
		return nil, errf(fmt.Sprintf("stage_layers must add up to the model's %d repeated blocks (one count per model chunk)", n),
			"the stages hold %d layers but the model has %d", sum, n)
	}
	return out, nil
}

// stageSplitText describes an uneven split for parallel()'s String.
func stageLayersText(xs []int64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = Itoa(x)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// validateStageLayers checks the uneven-stage options against themselves
// (ChunkLayers checks them against the model).
func (par Parallelism) validateStageLayers() error {
	uneven := len(par.StageLayers) > 0 || par.StageSplit != "" || par.FirstStageLayers != 0 || par.LastStageLayers != 0 || par.EmbeddingSlot || par.LossSlot
	if !uneven {
		return nil
	}
	if par.PP < 2 {
		return parallelErr("stage_layers, first_stage_layers, last_stage_layers, account_for_embedding and account_for_loss split pipeline stages: they need pp >= 2 (got pp=%d)", par.PP)
	}
	switch par.StageSplit {
	case "", "torchtitan":
	default:
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("unknown stage_layers %q", par.StageSplit), Hint: `stage_layers is a list of layer counts, one per model chunk, or "torchtitan" (its generated split points)`}
	}
	if par.FirstStageLayers < 0 || par.LastStageLayers < 0 {
		return parallelErr("first_stage_layers and last_stage_layers must be positive (got %d, %d)", par.FirstStageLayers, par.LastStageLayers)
	}
	for i, k := range par.StageLayers {
		if k < 0 {
			return parallelErr("stage_layers[%d] is negative (%d)", i, k)
		}
	}
	ways := 0
	for _, set := range []bool{len(par.StageLayers) > 0, par.StageSplit != "", par.FirstStageLayers > 0 || par.LastStageLayers > 0 || par.EmbeddingSlot || par.LossSlot} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		return &units.Error{Path: "parallel", Msg: "stage_layers and the Megatron split options (first_stage_layers, last_stage_layers, account_for_embedding, account_for_loss) are alternatives", Hint: "pick one way to split the layers"}
	}
	return nil
}

// sized is dst's first n elements, zeroed, when it has room for them, or
// a new list.
func sized(dst []int64, n int64) []int64 {
	if int64(cap(dst)) < n {
		return make([]int64, n)
	}
	dst = dst[:n]
	clear(dst)
	return dst
}
