package importers

import "strings"

// torchtitan's pipeline as its JobConfig builds it (6404b93:
// torchtitan/distributed/pipeline.py and models/llama3/infra/pipeline.py):
// the schedule, one stage per rank for the single-stage schedules and two
// for the looped ones unless pipeline_parallel_layers_per_stage sets the
// count, local_batch_size / pipeline_parallel_microbatch_size
// micro-batches, and each stage's layers from
// generate_llm_fqn_per_model_part: the embedding and the output count as
// pipeline_parallel_first_stage_less_layers and _last_stage_less_layers
// layers (1 each by default), the first stages take one more while the
// remainder lasts.

// torchtitanPipelineKeys are the pipeline's keys, which torchtitan reads
// only when pipeline_parallel_degree > 1.
var torchtitanPipelineKeys = []string{
	"parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_microbatch_size",
	"parallelism.pipeline_parallel_first_stage_less_layers", "parallelism.pipeline_parallel_last_stage_less_layers",
	"parallelism.pipeline_parallel_layers_per_stage",
}

// torchtitanSchedule is a pipeline_parallel_schedule memsh replays.
type torchtitanSchedule struct {
	name  string
	multi bool // a looped schedule (PipelineScheduleMulti): two or more stages per rank
}

var torchtitanSchedules = map[string]torchtitanSchedule{
	"1F1B": {"1f1b", false}, "Interleaved1F1B": {"interleaved", true}, "ZBVZeroBubble": {"zb-v", true},
}

// torchtitanLayers is the transformer layers of torchtitan's model
// flavors in the zoo (torchtitan/models/llama3/__init__.py).
var torchtitanLayers = map[string]int64{"llama3/8B": 32, "llama3/70B": 80, "llama3/405B": 126}

// pipeline is parallel()'s pipeline keywords for a layout with pp > 1,
// local batch batch and layers transformer layers (0 when the model came
// from --model), and the micro-batch size: the schedule splits the local
// batch (torchtitan's local_batch_size, or num_tokens_per_microbatch_per_dp_rank
// x num_pp_microbatches) into micro-batches, and memsh's train(batch=) is
// one micro-batch's sequences.
func (l torchtitanLayout) pipeline(t *tree, batch, layers int64) ([]string, int64, error) {
	name, err := t.str("parallelism.pipeline_parallel_schedule", "1F1B")
	if err != nil {
		return nil, 0, err
	}
	s, ok := torchtitanSchedules[name]
	if !ok {
		return nil, 0, t.errorf("parallelism.pipeline_parallel_schedule", "memsh replays 1F1B, Interleaved1F1B and ZBVZeroBubble", "schedule %s is not modelled", quoteKey(name))
	}
	micro, err := t.integer("parallelism.pipeline_parallel_microbatch_size", 1, 1, 1<<20)
	if err != nil {
		return nil, 0, err
	}
	if l.microBatches > 0 {
		micro = batch / l.microBatches
	}
	if batch%micro != 0 {
		return nil, 0, t.errorf("parallelism.pipeline_parallel_microbatch_size", "torchtitan asserts the same: it must divide local_batch_size",
			"%d does not divide local_batch_size %d", micro, batch)
	}
	in, err := t.integer("parallelism.pipeline_parallel_first_stage_less_layers", 1, 0, 1<<20)
	if err != nil {
		return nil, 0, err
	}
	out, err := t.integer("parallelism.pipeline_parallel_last_stage_less_layers", 1, 0, 1<<20)
	if err != nil {
		return nil, 0, err
	}
	perRank := int64(1)
	if s.multi {
		perRank = 2
	}
	const lpsKey = "parallelism.pipeline_parallel_layers_per_stage"
	lps, err := t.integer(lpsKey, 0, 1, 1<<20)
	if err != nil {
		return nil, 0, err
	}
	if lps > 0 && layers == 0 {
		t.notModelled = append(t.notModelled, lpsKey+": the stage count from the model's layers (pass a zoo flavor; memsh runs "+
			map[bool]string{false: "one stage", true: "two stages"}[s.multi]+" per rank)")
	}
	if lps > 0 && layers > 0 {
		stages := (layers + in + out + lps - 1) / lps
		switch {
		case stages%l.pp != 0:
			return nil, 0, t.errorf(lpsKey, "torchtitan asserts the same: pick a value whose stage count divides by the pipeline degree",
				"%d stages (%d layers, %d for the input and %d for the output) do not divide over pipeline_parallel_degree %d", stages, layers, in, out, l.pp)
		case !s.multi && stages != l.pp:
			return nil, 0, t.errorf(lpsKey, "torchtitan asserts the same: a single-stage schedule runs one stage per rank",
				"%d stages over pipeline_parallel_degree %d is not one per rank", stages, l.pp)
		case s.multi && stages < 2*l.pp:
			return nil, 0, t.errorf(lpsKey, "torchtitan asserts the same: a looped schedule runs at least two stages per rank",
				"%d stages over pipeline_parallel_degree %d is fewer than two per rank", stages, l.pp)
		}
		perRank = stages / l.pp
	}
	args := []string{kw("pp", num(l.pp)), kw("schedule", str(s.name))}
	if s.name == "interleaved" {
		args = append(args, kw("virtual_stages", num(perRank)))
	}
	args = append(args, kw("micro_batches", num(batch/micro)))
	if layers > 0 && s.name != "zb-v" { // a V's chunks run on other ranks than chunk mod pp
		split, err := torchtitanSplit(t, l.pp*perRank, layers, in, out)
		if err != nil {
			return nil, 0, err
		}
		if !even(split, layers) {
			nums := make([]string, len(split))
			for i, k := range split {
				nums[i] = num(k)
			}
			args = append(args, kw("stage_layers", "["+strings.Join(nums, ", ")+"]"))
		}
	}
	// torch.distributed.pipelining's stages: receive buffers per
	// micro-batch, outputs kept until the step ends
	return append(args, kw("pp_runtime", str("torch"))), micro, nil
}

// torchtitanSplit is generate_llm_fqn_per_model_part's layers per stage,
// with its checks.
func torchtitanSplit(t *tree, stages, layers, in, out int64) ([]int64, error) {
	eff := layers + in + out
	base, extra := eff/stages, eff%stages
	const key = "parallelism.pipeline_parallel_degree"
	switch {
	case base == 0:
		return nil, t.errorf(key, "torchtitan refuses the same: fewer stages or more layers", "%d stages would leave some empty (%d layers, %d for the input and %d for the output)", stages, layers, in, out)
	case in > base || out > base:
		return nil, t.errorf(key, "torchtitan refuses the same: lower pipeline_parallel_first/last_stage_less_layers", "the input (%d) or output (%d) weight exceeds the %d layers per stage", in, out, base)
	}
	split := make([]int64, stages)
	left := layers
	for g := range split {
		k := base
		if g < int(extra) {
			k++
		}
		switch g {
		case 0:
			k -= in
		case int(stages - 1):
			k -= out
		}
		k = min(max(k, 0), left)
		split[g], left = k, left-k
	}
	return split, nil
}

// even reports whether split gives every chunk the same layers (memsh's
// default split).
func even(split []int64, layers int64) bool {
	for _, k := range split {
		if k*int64(len(split)) != layers {
			return false
		}
	}
	return true
}
