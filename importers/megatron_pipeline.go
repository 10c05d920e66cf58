package importers

import "strings"

// Megatron's pipeline as mcore splits it (NVIDIA/Megatron-LM at d98e8a6:
// megatron/training/arguments.py lines 941-1000 derive the virtual
// pipeline size; megatron/core/transformer/transformer_block.py,
// get_num_layers_to_build, gives each model chunk its layers): the
// interleaved schedule with --num-layers-per-virtual-pipeline-stage or
// --num-virtual-stages-per-pipeline-rank, the embedding and the loss
// counted as a layer each with --account-for-embedding-in-pipeline-split
// and --account-for-loss-in-pipeline-split, and the first and last stages'
// own layer counts with --decoder-first-pipeline-num-layers and
// --decoder-last-pipeline-num-layers.

// megatronPipeline is parallel()'s pipeline keywords for pp > 1 stages of
// layers transformer layers and n micro-batches.
func megatronPipeline(t *tree, pp, layers, n int64) ([]string, error) {
	vpp, err := megatronVirtualStages(t, pp, layers)
	if err != nil {
		return nil, err
	}
	if v, _ := t.get("pipeline-model-parallel-layout"); v != nil {
		t.notModelled = append(t.notModelled, "pipeline-model-parallel-layout: the stages' own layout (memsh splits the layers as --num-layers and the split flags say)")
	}
	split, err := megatronSplit(t, pp, vpp, layers)
	if err != nil {
		return nil, err
	}
	args := []string{kw("pp", num(pp))}
	if vpp > 1 {
		args = append(args, kw("schedule", str("interleaved")), kw("virtual_stages", num(vpp)))
	}
	args = append(args, kw("micro_batches", num(n)))
	if !even(split, layers) {
		nums := make([]string, len(split))
		for i, k := range split {
			nums[i] = num(k)
		}
		args = append(args, kw("stage_layers", "["+strings.Join(nums, ", ")+"]"))
	}
	return args, nil
}

// megatronVirtualStages is the model chunks per pipeline rank (1 without
// the interleaved schedule), as arguments.py derives it.
func megatronVirtualStages(t *tree, pp, layers int64) (int64, error) {
	perVirtual, err := t.integer("num-layers-per-virtual-pipeline-stage", 0, 1, 1<<20)
	if err != nil {
		return 0, err
	}
	perRank, err := t.integer("num-virtual-stages-per-pipeline-rank", 0, 1, 1<<20)
	if err != nil {
		return 0, err
	}
	switch {
	case perRank > 0:
		return perRank, nil
	case perVirtual > 0:
		if _, first := t.leaves["decoder-first-pipeline-num-layers"]; first {
			return 0, t.errorf("num-layers-per-virtual-pipeline-stage", "Megatron asserts the same: use --num-virtual-stages-per-pipeline-rank with uneven stages",
				"with --decoder-first-pipeline-num-layers")
		}
		if _, last := t.leaves["decoder-last-pipeline-num-layers"]; last {
			return 0, t.errorf("num-layers-per-virtual-pipeline-stage", "Megatron asserts the same: use --num-virtual-stages-per-pipeline-rank with uneven stages",
				"with --decoder-last-pipeline-num-layers")
		}
		total := layers + megatronAccounted(t)
		if total%pp != 0 || (total/pp)%perVirtual != 0 {
			return 0, t.errorf("num-layers-per-virtual-pipeline-stage", "Megatron asserts the same: the layers per pipeline stage must divide by it",
				"%d layers over pipeline-model-parallel-size %d do not divide into chunks of %d", total, pp, perVirtual)
		}
		return total / pp / perVirtual, nil
	}
	return 1, nil
}

// megatronAccounted is the layers the embedding and the loss count as
// in the split.
func megatronAccounted(t *tree) int64 {
	var n int64
	for _, k := range []string{"account-for-embedding-in-pipeline-split", "account-for-loss-in-pipeline-split"} {
		if on, _ := t.boolean(k, false); on {
			n++
		}
	}
	return n
}

// megatronSplit is get_num_layers_to_build's layers of each model chunk,
// in chunk order (chunk g runs on pipeline rank g mod pp), with its
// checks.
func megatronSplit(t *tree, pp, vpp, layers int64) ([]int64, error) {
	first, err := t.integer("decoder-first-pipeline-num-layers", -1, 0, 1<<20)
	if err != nil {
		return nil, err
	}
	last, err := t.integer("decoder-last-pipeline-num-layers", -1, 0, 1<<20)
	if err != nil {
		return nil, err
	}
	embedding, err := t.boolean("account-for-embedding-in-pipeline-split", false)
	if err != nil {
		return nil, err
	}
	loss, err := t.boolean("account-for-loss-in-pipeline-split", false)
	if err != nil {
		return nil, err
	}
	perRank := make([]int64, pp)
	if first >= 0 || last >= 0 {
		if embedding || loss {
			return nil, t.errorf("account-for-embedding-in-pipeline-split", "Megatron asserts the same: drop it, or the first and last stages' layer counts",
				"a standalone embedding or loss stage with uneven stages")
		}
		rest, stages := layers, pp
		for _, k := range []int64{first, last} {
			if k >= 0 {
				rest, stages = rest-k, stages-1
			}
		}
		var middle int64
		if stages > 0 {
			if rest < 0 || rest%stages != 0 {
				return nil, t.errorf("decoder-first-pipeline-num-layers", "Megatron asserts the same: the layers left must divide over the middle stages",
					"%d layers left over %d middle stages", rest, stages)
			}
			middle = rest / stages
		} else if rest != 0 {
			return nil, t.errorf("decoder-first-pipeline-num-layers", "the first and last stages' layers must add up to --num-layers",
				"%d layers left over no middle stage", rest)
		}
		for r := range perRank {
			perRank[r] = middle
		}
		if first >= 0 {
			perRank[0] = first
		}
		if last >= 0 {
			perRank[pp-1] = last
		}
	} else {
		total := layers + megatronAccounted(t)
		if total%pp != 0 {
			return nil, t.errorf("pipeline-model-parallel-size", "Megatron asserts the same: --num-layers (with the embedding and loss accounted) must divide by it",
				"%d layers do not divide over %d stages", total, pp)
		}
		for r := range perRank {
			perRank[r] = total / pp
		}
	}
	split := make([]int64, pp*vpp)
	for g := range split {
		r := int64(g) % pp
		if perRank[r]%vpp != 0 {
			return nil, t.errorf("pipeline-model-parallel-size", "Megatron asserts the same: each stage's layers must divide over its virtual stages",
				"stage %d's %d layers do not divide over %d virtual stages", r, perRank[r], vpp)
		}
		split[g] = perRank[r] / vpp
	}
	if embedding {
		split[0]--
	}
	if loss {
		split[len(split)-1]--
	}
	if split[0] < 0 || split[len(split)-1] < 0 {
		return nil, t.errorf("pipeline-model-parallel-size", "fewer stages or more layers", "not enough layers in the first or last virtual stage")
	}
	return split, nil
}

// megatronPipelineFlags are the split flags, read only with pipeline
// stages.
var megatronPipelineFlags = []string{
	"num-layers-per-virtual-pipeline-stage", "num-virtual-stages-per-pipeline-rank", "account-for-embedding-in-pipeline-split",
	"account-for-loss-in-pipeline-split", "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers",
	"pipeline-model-parallel-layout",
}
