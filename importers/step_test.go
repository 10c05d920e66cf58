package importers

import (
	"math"
	"testing"

	"go.starlark.net/starlark"
)

// A differential check of the imported batch. The hand-written plans of
// the import cases are written by the person who wrote the importer, so a
// shared misreading of what train(batch=) is (one micro-batch's sequences
// on one data-parallel rank) passes both. Each case therefore also says
// what one optimizer step of the whole job processes, computed from the
// config's own keys by the formula its framework defines its global batch
// with (the helpers below, each with its source), and the imported plan's
// replay must report the same: its tokens per second times its step time
// (sim/timing's GpuWork.Tokens: batch x seq x micro-batches x data-parallel
// degree), or for a weather model its samples per second times its step
// time. Neither side reads the other: the figure is the framework's
// definition, the replay's is what memsh times.

// step is what one optimizer step of the whole job processes.
type step struct {
	tokens  int64 // tokens, all data-parallel ranks together (a language model)
	samples int64 // input states, all data-parallel ranks together (a weather model)
}

// replayedStep is what a replayed step reports it processes; NaN where
// the report has no figure (no time model, or a weather model's tokens).
type replayedStep struct{ tokens, samples float64 }

// replayedStepScript reads the replay's figures into _step.
const replayedStepScript = "_step = (_r.tokens_per_s, _r.samples_per_s, _r.step_time)\n"

func replayedStepOf(t *testing.T, globals starlark.StringDict) replayedStep {
	t.Helper()
	tup, ok := globals["_step"].(starlark.Tuple)
	if !ok || len(tup) != 3 {
		t.Fatalf("_step is %v", globals["_step"])
	}
	f := func(v starlark.Value) float64 {
		if x, ok := v.(starlark.Float); ok {
			return float64(x)
		}
		return math.NaN()
	}
	s := f(tup[2])
	return replayedStep{tokens: f(tup[0]) * s, samples: f(tup[1]) * s}
}

// check compares the replay's figures with the framework's.
func (want step) check(t *testing.T, got replayedStep) {
	t.Helper()
	if want.tokens == 0 && want.samples == 0 {
		t.Errorf("the case gives no step figure (the replay reports %.0f tokens, %.0f samples a step)", got.tokens, got.samples)
		return
	}
	for _, c := range []struct {
		what string
		want int64
		got  float64
	}{{"tokens", want.tokens, got.tokens}, {"samples", want.samples, got.samples}} {
		if c.want == 0 {
			continue
		}
		if math.IsNaN(c.got) || math.Abs(c.got-float64(c.want)) > 1e-6*float64(c.want) {
			t.Errorf("one optimizer step: the replay processes %.0f %s, the config's framework %d (%.4g times as many)",
				c.got, c.what, c.want, c.got/float64(c.want))
		}
	}
}

// megatronStep is Megatron-LM's global batch (megatron/training/arguments.py:
// --global-batch-size, default micro-batch-size x data-parallel size, the
// data-parallel size world / (tp x pp x cp); core/num_microbatches_calculator.py
// runs global / (micro x dp) micro-batches per step), each sequence
// --seq-length tokens. Context-parallel ranks share a sequence, and the
// experts' ranks are data-parallel ranks: neither multiplies the batch.
func megatronStep(globalBatch, seqLength int64) step {
	return step{tokens: globalBatch * seqLength}
}

// megatronDefaultStep is megatronStep without --global-batch-size.
func megatronDefaultStep(micro, world, tp, pp, cp, seqLength int64) step {
	return megatronStep(micro*world/(tp*pp*cp), seqLength)
}

// deepspeedStep is DeepSpeed's train_batch_size (runtime/config.py,
// _batch_assertion: train_batch_size = train_micro_batch_size_per_gpu x
// gradient_accumulation_steps x the data-parallel world size, which
// without a model-parallel unit is every GPU), each sequence seq tokens.
func deepspeedStep(trainBatch, seq int64) step {
	return step{tokens: trainBatch * seq}
}

// hfStep is the Hugging Face Trainer's total train batch size (trainer.py,
// _inner_training_loop: per_device_train_batch_size x
// gradient_accumulation_steps x args.world_size, the processes
// accelerate launches, one a GPU), each row seq tokens.
func hfStep(perDevice, accum, world, seq int64) step {
	return step{tokens: perDevice * accum * world * seq}
}

// torchtuneStep is a torchtune recipe's step: batch_size x
// gradient_accumulation_steps rows on each data-parallel rank
// (full_finetune_distributed.py: the DistributedSampler over the
// data-parallel mesh, ParallelDims' dp = world / (tp x cp)), each row
// max_seq_len tokens. Context-parallel ranks share a row.
func torchtuneStep(batch, accum, world, tp, cp, seq int64) step {
	return step{tokens: batch * accum * world / (tp * cp) * seq}
}

// torchtitanStep is torchtitan's global batch (train.py at 6404b93:
// training.global_batch_size, -1 meaning local_batch_size x the
// data-parallel degree dp_replicate x dp_shard, the batch mesh "dp" of
// ParallelDims; gradient_accumulation_steps = global / (local x dp)), each
// sequence training.seq_len tokens. The context-parallel ranks share a
// sequence, the pipeline's micro-batches split the local batch, and the
// expert-parallel ranks are borrowed from dp_shard x cp: none multiplies
// the batch.
func torchtitanStep(globalBatch, seqLen int64) step {
	return step{tokens: globalBatch * seqLen}
}

// torchtitanLocalStep is torchtitanStep with global_batch_size -1.
func torchtitanLocalStep(local, dpReplicate, dpShard, seqLen int64) step {
	return torchtitanStep(local*dpReplicate*dpShard, seqLen)
}

// torchtitanPyStep is a torchtitan Python config's step (trainer.py at
// b5bcd76c6, lines 409-428): training.num_tokens_per_train_step, -1
// meaning one iteration, whose tokens are num_tokens_per_microbatch_per_dp_rank
// x num_pp_microbatches (with pipelining) on each data-parallel rank,
// dp_replicate x dp_shard of them.
func torchtitanPyStep(perTrainStep, perMicrobatch, ppMicrobatches, dp int64) step {
	if perTrainStep > 0 {
		return step{tokens: perTrainStep}
	}
	return step{tokens: perMicrobatch * ppMicrobatches * dp}
}

// anemoiStep is an anemoi-training step's input states
// (anemoi-training 0.5.1, distributed/strategy.py DDPEnsGroupStrategy:
// the dataset is sharded over the ensemble groups, world /
// hardware.num_gpus_per_ensemble of them, every model group of an
// ensemble reading the same dates; Lightning steps the optimizer every
// training.accum_grad_batches batches of dataloader.batch_size.training).
// The members of an ensemble are forwards of one input state.
func anemoiStep(batch, world, gpusPerEnsemble, accum int64) step {
	return step{samples: batch * world / gpusPerEnsemble * accum}
}
