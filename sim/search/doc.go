// Package search finds the fastest layouts of a model on a cluster (SEEDS.md
// story 3: "finding the best combination ... is an optimisation problem
// of its own"). It enumerates every valid layout of the space (data x
// tensor x pipeline x context x expert parallelism, the experts' tensor
// parallelism, sharding and, when asked, ZeRO-Offload and ZeRO-Infinity, micro-batch,
// schedule, checkpointing), prunes by memory first, ranks by step time and
// replays the fastest in full until it has the layouts asked for.
//
// Memory first: a layout whose model states alone, or states plus the
// activations its GPU holds for backward, exceed the GPU cannot fit
// (fastEstimate.minDevice is a lower bound of what the replay reports), so
// it is dropped before any replay, and before its step time is
// estimated. A layout the plan refuses (RefusalFor: ValidateFor's error,
// a units.IntError's message written once per class, not per layout;
// search_number.go), or whose profile's
// lowering refuses its layout (core.LayoutError: torchao's float8 at a tp
// whose shards torch._scaled_mm refuses), is rejected and counted by
// reason (space_reasons.go); any other lowering error fails the search. The step time of the rest comes from block profiles
// (search_profile.go) through the same time model as a replay; a
// profile is lowered for the bound and priced (search_profile_lower.go) (its ops' times and
// collectives summed) only when the bound keeps one of its layouts (a
// profile's programs copy a block one of them lowered where they would
// lower it alike, core.BlockTemplates, rather than each lowering its
// first block). The
// layouts are then replayed in order of that time, in parallel, and kept
// when they fit; every row of the result is a full replay. The walk
// times a layout only when it comes up by a lower bound of its step time
// (its slowest stage's compute and what that stage's tensor-parallel
// collectives leave exposed, search_bound_tp.go; each pipeline split of
// the blocks worked out once per run, search_split.go) and its memory bound
// does not show it dominated there (walk.has). The Pareto front's walk replays a
// pipelined layout's stages on every worker, its fullest by the bound
// first, and stops at a stage that already needs as much memory as a
// faster layout that fits: the layout cannot be on the front
// (sim.EvaluateBelow). The layouts after it that the walk already has
// share the workers' pool of replays (sim.EvaluateBelowEach): one worker
// starts the next layout's stages while another finishes this one's,
// and the next layout's limit falls, while its stages run, as this one
// ends.
//
// A layout is the base plan with the space's axes in place of its own;
// every other setting of the base plan (Megatron's flags, LoRA, compile,
// the cluster's host, ...) is carried into it (space_base.go), and one
// the space cannot hold is refused. A layout with its parameters on the
// host (offload "params"), its optimizer on NVMe (offload "nvme",
// ZeRO-Infinity) or its activations on the host (a base plan's
// offload(activations=)) is ordered by its replay's step time: the
// profiles do not sum their PCIe copies and NVMe swaps. With the base
// plan's train(host_memory=), every replay is checked against it as
// replay's checkHost checks it, and a layout short of host memory does
// not fit (host_check.go).
//
// search sits above the engine: it builds plans, estimates them with the
// time model and replays them with sim.Evaluate; nothing below imports it.
package search
