package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/replay"
)

// TestSimulateOffload counts torchtune's stream overlap by hand. Copies
// run at 1e9 B/s, so 1e6 B is 1 ms; the CPU dispatches in no time (it
// is always ahead of the GPU) unless said.
func TestSimulateOffload(t *testing.T) {
	const ms = 1e-3
	fwd := func(gpu ...float64) []OpCost {
		var c []OpCost
		for _, g := range gpu {
			c = append(c, OpCost{Fwd: g * ms, Bwd: 2 * g * ms})
		}
		return c
	}
	out := func(after int32, msec float64) replay.CopyOut {
		return replay.CopyOut{After: after, Bytes: int64(msec * 1e6)}
	}
	bwd := func(op int32) replay.OffloadEvent { return replay.OffloadEvent{Kind: replay.EvBackward, Op: op} }
	in := func(msec float64) replay.OffloadEvent {
		return replay.OffloadEvent{Kind: replay.EvCopyIn, Bytes: int64(msec * 1e6)}
	}
	for _, c := range []struct {
		name    string
		costs   []OpCost
		outs    []replay.CopyOut
		events  []replay.OffloadEvent
		streams bool
		with    float64 // ms, when s0 is done with the copies
		without float64 // ms, without them
	}{
		{
			// Forward 3 x 10 ms; x1 (4 ms) copied after op 0 runs s1 10-14,
			// x2 after op 1 runs 20-24: s0 ends at 30. Backward 3 x 20 ms:
			// op 2 to 50; x2 comes back at 50 (s1 free since 24: 24-28,
			// issued when the CPU reached it, long before), x1 28-32; s0
			// never waits: 30 + 60 = 90 either way.
			name: "hidden", costs: fwd(10, 10, 10), outs: []replay.CopyOut{out(0, 4), out(1, 4)},
			events: []replay.OffloadEvent{bwd(2), in(4), bwd(1), in(4), bwd(0)}, streams: true, with: 90, without: 90,
		},
		{
			// use_streams=False: the 4 copies run on s0: 90 + 4 x 4 = 106.
			name: "no streams", costs: fwd(10, 10, 10), outs: []replay.CopyOut{out(0, 4), out(1, 4)},
			events: []replay.OffloadEvent{bwd(2), in(4), bwd(1), in(4), bwd(0)}, streams: false, with: 106, without: 90,
		},
		{
			// 30 ms copies: x1 runs 10-40, x2 40-70 while the forward ends
			// at 30. Backward: op 2 to 50; the first unpacking node waits
			// for the stash (70), x2 comes back 70-100 and op 1 waits for it
			// (100-120); x1 100-130, op 0 130-150. 150 - 90 = 60 exposed.
			name: "copies longer than the compute", costs: fwd(10, 10, 10), outs: []replay.CopyOut{out(0, 30), out(1, 30)},
			events: []replay.OffloadEvent{bwd(2), in(30), bwd(1), in(30), bwd(0)}, streams: true, with: 150, without: 90,
		},
		{
			// Six 1 ms ops, a 10 ms copy after each: s1 ends the copies at
			// 11, 21, ..., 51; the sixth pack drops the first stash entry,
			// s0.wait_event(copy 1): s0 waits from 6 to 11.
			name: "fwd_stash of 5", costs: fwd(1, 1, 1, 1, 1, 1),
			outs:    []replay.CopyOut{out(0, 10), out(1, 10), out(2, 10), out(3, 10), out(4, 10), out(5, 10)},
			streams: true, with: 11, without: 6,
		},
		{
			// The previous node's gate: four 10 ms ops, 25 ms copies after
			// ops 0, 1, 2 (s1: 10-35, 35-60, 60-85; s0 ends the forward at
			// 40). Backward ops of 20 ms: op 3 to 60, the stash wait to 85,
			// a back 85-110, op 2 110-130 (its event: 130), b 110-135, op 1
			// 135-155 (its hook gates s1 on op 2's event, 130), c
			// max(135, 130) = 135-160, op 0 160-180. 180 - 120 = 60.
			name: "one layer ahead", costs: fwd(10, 10, 10, 10), outs: []replay.CopyOut{out(0, 25), out(1, 25), out(2, 25)},
			events: []replay.OffloadEvent{bwd(3), in(25), bwd(2), in(25), bwd(1), in(25), bwd(0)}, streams: true, with: 180, without: 120,
		},
		{
			// A CPU behind the GPU: 30 ms to dispatch each kernel of 10 ms
			// (forward) or 20 ms (backward). Forward: op 0 runs 30-40, x1
			// (40 ms) copies 40-80, op 1 runs 60-70. Backward: op 1 runs
			// 90-110; the CPU reaches op 0's node at 90 and issues x1's
			// copy back, 90-130; op 0 is dispatched by 120 but waits for the
			// copy: 130-150, against 120-140 without it: 10 ms exposed.
			name: "CPU behind", costs: []OpCost{{Fwd: 10 * ms, Bwd: 20 * ms, FwdCPU: 30 * ms, BwdCPU: 30 * ms}, {Fwd: 10 * ms, Bwd: 20 * ms, FwdCPU: 30 * ms, BwdCPU: 30 * ms}},
			outs:   []replay.CopyOut{out(0, 40)},
			events: []replay.OffloadEvent{bwd(1), in(40), bwd(0)}, streams: true, with: 150, without: 140,
		},
	} {
		got := simulateOffload(c.costs, c.outs, c.events, 1e9, c.streams) / ms
		base := simulateOffload(c.costs, nil, c.events, 1e9, c.streams) / ms
		if math.Abs(got-c.with) > 1e-9 || math.Abs(base-c.without) > 1e-9 {
			t.Errorf("%s: %.6g ms with the copies, %.6g without; want %g and %g", c.name, got, base, c.with, c.without)
		}
	}
}
