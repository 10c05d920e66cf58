// Package core is what a training step computes: the plan (Plan: model,
// batch, precision, optimizer, checkpointing, fine-tuning, parallel
// layout), the module tree (Layer, and the structural layers Sequential,
// Repeat and Residual), and their lowering to a program (Program) for one
// micro-batch.
//
// A program is a list of ops over values (forward tensors, one storage
// each) and parameters. An op declares what it reads and writes, what
// autograd saves for its backward (with the dtypes PyTorch saves them in),
// its transient workspaces, FLOPs and bytes, and the checkpoint region it
// runs in. Lowering follows what PyTorch really allocates: autocast's
// weight copies and op dtypes, saved tensors per op, checkpoint regions
// that keep only their inputs, LoRA adapters (in PEFT's dtype: a
// parameter may have a dtype of its own, ParamInfo.DType, param_dtype.go)
// and quantized frozen weights, and the shapes tensor, context, sequence and expert parallelism give one
// rank (tp.go; torchao's float8 linears under DTensor tensor parallelism:
// float8_tp.go; torch's micro-pipeline TP, async_tp.go; the fused and
// vocabulary-parallel cross-entropies of Megatron and Transformer Engine,
// fused_ce.go). A pipelined plan lowers one stage at a time (pipeline.go).
// A preference objective (TRL's DPO: preference.go, dpo.go) lowers the
// model twice, the policy's forward and, under no_grad, the reference's
// (a frozen copy's, or the policy's modules without their adapters).
//
// The Builder is the lowering API: layers call its primitives (Linear,
// LayerNorm, Cast, AddOp, Out, Save, ...) to add ops. Layer kinds live in
// sim/nn and sim/graph; core knows them only through Layer and the optional
// interfaces in layer.go (TokenLookup, LayoutChecker, ExpertLayer,
// PackingChecker, InDim/OutDim).
//
// core computes no memory figures: sim/replay replays a program through
// the allocator model. Sizes are checked on the way in (checked.go): no
// tensor, total or count can overflow the int64 sums of a report.
package core
