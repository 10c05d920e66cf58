// Package snapshot speaks PyTorch's memory snapshot format both ways: the
// pickle torch.cuda.memory._dump_snapshot() writes after
// _record_memory_history(), which pytorch.org/memory_viz opens. Write turns
// a replayed step into one (segments and blocks from the allocator model,
// a device trace of alloc, free and segment events, frames naming the
// module path, op and phase), so PyTorch's viewer opens memsh's prediction
// unchanged; Read parses one a user recorded, into the same types, to set a
// measurement beside the prediction.
//
// Reading never constructs an arbitrary object: the pickle is decoded as
// data (dicts, lists, strings, numbers), and a pickle that asks for any
// other class or callable is refused.
package snapshot
