// Package advise answers the question every memsh user with an OOM asks
// next: what is the cheapest change that makes this step fit, and how much
// slower is it? (issue 21; SEEDS.md story 1 took five attempts over a week
// to find "run the members one at a time".)
//
// Run lists the changes a user can make without changing the model, from a
// table of change generators (generators.go: micro-batch and gradient
// accumulation, checkpointing, precision, optimizer, loss chunks, sharding,
// offload, the allocator, ensemble members, a graph model's chunks, table
// placement, layouts), one entry per knob. Every candidate is replayed by
// the engine (sim.Evaluate), never estimated: single changes first, then
// pairs of changes to different knobs. The fitting ones are ranked by step
// time; each row says what to write (train() and parallel() keywords),
// what it uses and costs, and why it helps, read off the two reports. A
// plan short of host memory (train(host_memory=)) is advised from its
// replay without the check: a candidate short of it too is replayed
// again without the check, counted, and pairs only with one that passes
// (the offload taken back, offloadDrops); a plan that fits with an
// offload the GPU can hold gets that offload taken back as its rows.
//
// MaxBatch and MaxSeq find the largest micro-batch or sequence that fits
// by doubling and bisection on the replay.
//
// advise sits above the engine, beside the layout search: it builds plans
// and replays them with sim.Evaluate; nothing below imports it.
package advise
