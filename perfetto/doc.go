// Package perfetto writes a simulated step as a Chrome trace-event JSON
// document, which ui.perfetto.dev and chrome://tracing open: one track per
// stream the step uses (the GPU's compute, communication, the pipeline's
// bubble, host transfers, the step's fixed overhead), each module's forward,
// recompute and backward as slices named by its module path, and the terms
// of the step outside the modules after them.
//
// The slices are the report's step by module (r.modules), laid end to end
// in the order the step runs them: forward in module order, then recompute
// and backward in reverse, then the optimizer and the other terms. Their
// durations sum to the report's step time, so the trace spans exactly one
// step; where the real step overlaps communication with compute, the trace
// shows only what is exposed, as the step time counts it.
package perfetto
