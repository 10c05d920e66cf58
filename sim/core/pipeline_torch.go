package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// torch.distributed.pipelining as PyTorch 2.6 runs a stage
// (parallel(pp_runtime="torch")): the torch of torchtitan's December 2024
// benchmarks (1963fc8), torch/distributed/pipelining/stage.py,
// schedules.py and _backward.py. Beyond what Megatron's schedules hold
// (pipeline.go), a stage keeps:
//
//   - receive buffers: PipelineStage._prepare_forward_infra allocates one
//     activation buffer per micro-batch on every stage but the first
//     (args_recv_info, _make_tensor_from_meta), _prepare_backward_infra
//     one gradient buffer per micro-batch on every stage but the last
//     (grad_recv_info); both at the first step, kept by the stage;
//   - outputs: forward_one_chunk appends every micro-batch's output to
//     output_chunks, cleared only when the next step() starts
//     (clear_runtime_states), so a sent activation is never freed within
//     the step (Megatron frees it after the send; pytorch/pytorch#128910,
//     changed for all but the last stage by #153383 in May 2025). On the
//     last stage the outputs are the logits, which step() concatenates
//     along the batch (_merge_outputs, torch.cat) before it returns;
//     torchtitan drops the result;
//   - input gradients: stage_backward runs torch.autograd.backward, which
//     accumulates each received activation's gradient into its buffer's
//     .grad, set to None by the next step's clear_runtime_states
//     (pytorch/pytorch#164329, October 2025, drops it after the send).
//
// The stage's replay holds the schedule's in-flight micro-batches, n_g
// copies of chunk g. In 1F1B the peak is the last 1B1F of the steady
// state: n_g micro-batches in flight and the other m - n_g done, their
// outputs and input gradients kept, their receive buffers idle. Those are
// allocated before the step and kept, so the replay is that moment.

// StageBuffer is Count tensors a stage holds for the micro-batches it does
// not replay.
type StageBuffer struct {
	Name, Why string
	Shape     []int64
	Dtype     units.DType
	Bytes     int64 // each
	Count     int64
	Cat       Category
}

// stageCopy is one in-flight micro-batch copy of a chunk: the activation
// it received (NoValue on the first chunk) and its output (the activation
// sent on, or the logits on the last chunk).
type stageCopy struct {
	chunk     int64
	recv, out Value
}

// torchPipelining records what torch.distributed.pipelining keeps for
// the copies of a stage with m micro-batches per chunk.
func (b *Builder) torchPipelining(copies []stageCopy, m, chunks int64) {
	sp := b.P.Stage
	inFlight := map[int64]int64{}
	var firsts []stageCopy
	for _, c := range copies {
		if inFlight[c.chunk] == 0 {
			firsts = append(firsts, c)
		}
		inFlight[c.chunk]++
		b.P.Held = append(b.P.Held, c.out) // output_chunks
		if c.recv != NoValue {
			b.P.Held = append(b.P.Held, c.recv) // a receive buffer
			if !b.Eval {
				sp.HeldGrads = append(sp.HeldGrads, c.recv)
			}
		}
	}
	if !b.Eval {
		for i := range sp.Outputs {
			sp.Outputs[i].Buffer = !sp.Outputs[i].Loss
		}
	}
	add := func(g int64, v Value, count int64, name, why string, cat Category) {
		vi := b.Val(v)
		if count > 0 && vi.Bytes > 0 {
			sp.Buffers = append(sp.Buffers, StageBuffer{Name: fmt.Sprintf("chunk %d: %s", g, name), Why: why, Shape: vi.Shape,
				Dtype: vi.Dtype, Bytes: vi.Bytes, Count: count, Cat: cat})
		}
	}
	for _, c := range firsts {
		g, done := c.chunk, m-inFlight[c.chunk]
		if c.recv != NoValue {
			add(g, c.recv, done, "idle receive buffers", "activation receive buffers of the micro-batches not in flight (torch pipelining's args_recv_info, kept)", CatActivations)
			if !b.Eval {
				add(g, c.recv, done, "input gradients", "gradients of the done micro-batches' received activations (their buffers' .grad, kept until the next step)", CatTemporaries)
			}
		}
		if g == chunks-1 {
			add(g, c.out, done, "logits", "outputs (logits) of the done micro-batches, kept for step()'s merge (torch pipelining's output_chunks)", CatActivations)
			o := b.Val(c.out)
			if len(o.Shape) > 0 {
				shape := append([]int64(nil), o.Shape...)
				shape[0] *= m
				sp.Merged = &StageBuffer{Name: "merged outputs", Why: "the micro-batches' outputs concatenated by step() (_merge_outputs) and dropped by the caller",
					Shape: shape, Dtype: o.Dtype, Bytes: o.Bytes * m, Count: 1, Cat: CatActivations}
			}
			continue
		}
		add(g, c.out, done, "outputs", "outputs of the done micro-batches, sent and kept (torch pipelining's output_chunks)", CatActivations)
		if !b.Eval {
			add(g, c.out, done, "idle gradient receive buffers", "gradient receive buffers of the micro-batches not in flight (torch pipelining's grad_recv_info, kept)", CatTemporaries)
		}
	}
}
