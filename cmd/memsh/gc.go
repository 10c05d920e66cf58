package main

import "runtime/debug"

// gcPercent is the garbage collector's pace in the memsh process
// (debug.SetGCPercent), unless GOGC is set in its environment: the heap
// may grow to five times what the last collection left live before the
// next, not twice (Go's default, GOGC=100). An evaluation allocates its
// programs, replays and reports afresh (BenchmarkEvaluateLlama70B3D: 2.9
// MB an evaluation, of a live heap of a few MB), so the collector ran
// about once an evaluation, and each cycle stops and signals the
// goroutines and turns the write barrier on while it marks. Measured in
// session 45 on the shared 2-core machine, the user + sys CPU seconds
// of `memsh run` (median of 3 runs each, /usr/bin/time), and the peak
// resident memory:
//
//	                            GOGC=100       200            400
//	examples/search_70b.star    4.92 s 190 MB  4.78 s 265 MB  3.80 s 325 MB
//	examples/advise.star        4.61 s  95 MB  3.89 s 110 MB  2.92 s 170 MB
//
// --max-memory (a quarter of the machine's memory by default) sets the
// runtime's memory limit while scripts run (memoryContext): nearing it,
// the collector runs as often as it must whatever the pace, so the
// faster pace holds the heap to that limit as the default does
// (--max-memory 0 lifts it). GOGC=100 in the environment restores Go's
// default.
const gcPercent = 400

// setGCPercent sets the collector's pace to gcPercent unless the
// environment's GOGC sets it.
func setGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}
