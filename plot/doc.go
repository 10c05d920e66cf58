// Package plot draws simulated steps as pictures: the memory timeline of a
// report as a self-contained SVG (stacked areas by category, the reserved
// curve, the peak and the limit PyTorch may reserve, the phases of the
// step, the largest and the first failing allocation marked) followed by
// its time by module (modules.go: a bar per row of r.modules), a chart of
// two numeric columns of a table of results (table.go: rows as points in
// series, those that do not fit as crosses, the Pareto front ringed, axes
// in bytes, seconds or percent), an HTML page holding charts and their
// tables, and a one-line text sparkline of the timeline for terminals.
//
// The x axis of a timeline is the sequence of allocation and free events
// of the step (sim.Report.Timeline), not wall-clock time: the engine
// replays memory events, and a long matmul and a short add each move it
// once.
//
// plot imports sim and the standard library only: no Starlark and no other
// memsh package. It reads no files, environment or clock, and its output is
// deterministic.
//
// Not a stable API: it exists for the memsh command.
package plot
