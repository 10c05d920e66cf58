package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/graph"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// anemoi's cpu_offload on the processor (offload_wrapper inside the
// segment's checkpoint, layers/processor.py@models-0.8.1 l.61-63, 169,
// 372): save_on_cpu's hooks are the innermost, so each tensor the segment
// saves is copied to pinned host memory once per saving op and nothing is
// recomputed. Counted by hand for the one-layer processor of
// TestGraphTransformerProcessorSaved (S = 10 nodes, E = 20 edges, C = 8,
// H = 2, fp16 autocast):
//
//   - the 5,880 activation bytes that test counts, each once, except the
//     edge index [2, 20] int64 (320 B), which query_i, key_j, value_j
//     (index_select) and the scatter each save: 3 more copies, 960 B;
//   - autocast's fp16 weight copies the linears save because their input
//     needs a gradient: lin_self, lin_query, lin_key, lin_value and
//     projection 5 x 64 x 2 = 640 B, node_dst_mlp 2 x 256 x 2 = 1,024 B
//     (lin_edge's input, the fixed edge attributes, needs none: its weight
//     is not saved);
//
// 5,880 + 960 + 1,664 = 8,504 B copied, 17,008 B over PCIe (to the host
// in the forward, back in the backward), no recompute. Each copy is a
// block of PyTorch's CachingHostAllocator, its size rounded up to a power
// of two (replay.PinnedBlock): the 5,880 B as tensors are
//
//	norm input 320 -> 512, mean and rstd 2 x 40 -> 2 x 64; the 4 linears'
//	fp16 casts 4 x 160 -> 4 x 256; lin_edge's cast 120 -> 128; q/k norms'
//	fp32 copies 2 x 320 -> 2 x 512, their mean and rstd 4 x 80 -> 4 x 128;
//	query_i, key_j, value_j 3 x 320 -> 3 x 512; softmax exp and
//	denominator 2 x 160 -> 2 x 256, alpha 160 -> 256; the edge index 320
//	-> 512; projection's cast 160 -> 256; the MLP norm's input 320 -> 512,
//	mean and rstd 2 x 40 -> 2 x 64; node_dst_mlp's cast 160 -> 256, GELU
//	input and output 2 x 640 -> 2 x 1,024
//
// = 9,344 B; the edge index's 3 more copies 3 x 512 = 1,536 B; the weight
// copies are powers of two already (5 x 128 + 2 x 512 = 1,664 B): 12,544
// B of pinned host memory. The
// segment's input stays on the GPU (_NoopSaveInputs saves it outside the
// offload hooks), so what the forward leaves on the GPU for the backward
// is the same with and without offload.
func TestProcessorCPUOffload(t *testing.T) {
	run := func(offload bool) *replay.Report {
		p := gtProcessorPlan(t, "fp16-mixed", 1, "train")
		p.Members = 1
		p.Model.Layers[0].(*graph.GraphTransformerProcessor).CPUOffload = offload
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	plain, off := run(false), run(true)
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"host memory", float64(off.HostMemory), 12_544},
		{"PCIe traffic", float64(off.Traffic.PCIe), 17_008},
		{"recompute FLOPs with offload", off.FLOPs.Recompute, 0},
		{"host memory without offload", float64(plain.HostMemory), 0},
		{"saved on the GPU at the forward's end", float64(off.SavedActivations), float64(plain.SavedActivations)},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	if plain.FLOPs.Recompute <= 0 {
		t.Errorf("without offload the segment is recomputed: recompute FLOPs %v", plain.FLOPs.Recompute)
	}
	if len(off.HostBreakdown) != 1 || off.HostBreakdown[0].Name != "activations (pinned)" {
		t.Errorf("host breakdown %v, want pinned activations only", off.HostBreakdown)
	}
}

// The same on the Bris model (SEEDS.md story 1): with three members one at
// a time the step's peak was the processor's recompute of its last
// segment; offloaded, the processor recomputes nothing and the peak moves
// to the decoder's recompute, while the story's stacked 2-member first
// step still fails at the decoder's 10.37 GiB scatter output with the
// same free memory (the processor's segment inputs, all the forward keeps
// of it on the GPU, stay).
func TestBrisProcessorOffload(t *testing.T) {
	withOffload := func(p *core.Plan) *core.Plan {
		epd := p.Model.Layers[0].(*graph.EncoderProcessorDecoder)
		gp := *epd.Processor.(*graph.GraphTransformerProcessor)
		gp.CPUOffload = true
		epd.Processor = &gp
		return p
	}
	stacked := func(offload bool) *replay.Report {
		p := bris(t, 2, "stacked", 16, 32, "train")
		p.Validation, p.FirstStep = true, true
		if offload {
			p = withOffload(p)
		}
		return evalBris(t, p)
	}
	a, b := stacked(false), stacked(true)
	if a.OOM == nil || b.OOM == nil || a.OOM.Alloc.Bytes != 11_135_229_952 || b.OOM.Alloc.Bytes != a.OOM.Alloc.Bytes || b.OOM.Message != a.OOM.Message {
		t.Errorf("stacked, first step: the same 10.37 GiB failure with and without offload, got %+v and %+v", a.OOM, b.OOM)
	}
	p := withOffload(bris(t, 3, "sequential", 4, 32, "train"))
	p.Validation = true
	r := evalBris(t, p)
	if !r.Fits || !strings.Contains(r.PeakAt.Op, "decoder") || r.FLOPs.Recompute <= 0 {
		t.Errorf("3 members one at a time, offloaded: fits %v, peak in %s, recompute FLOPs %v; want a fit peaking in the decoder, which still recomputes",
			r.Fits, r.PeakAt.Op, r.FLOPs.Recompute)
	}
	// Every copy crosses PCIe twice and sits in a pinned block of at least
	// its size and under twice it (a power of two).
	if r.HostMemory <= 0 || 2*r.HostMemory < r.Traffic.PCIe || r.HostMemory >= r.Traffic.PCIe {
		t.Errorf("host memory %d, PCIe %d: want host memory in [PCIe/2, PCIe)", r.HostMemory, r.Traffic.PCIe)
	}
}

// anemoi's mappers cannot offload (BaseMapper.offload_layers): refused
// with the reason.
func TestMapperCPUOffloadRefused(t *testing.T) {
	p := bris(t, 1, "stacked", 4, 1, "train")
	dec := *p.Model.Layers[0].(*graph.EncoderProcessorDecoder).Decoder
	dec.CPUOffload = true
	err := dec.Validate("bris.decoder")
	if err == nil || !strings.Contains(err.Error(), "offload_layers") {
		t.Fatalf("decoder with cpu_offload: %v, want the refusal naming offload_layers", err)
	}
}

// Pinned host memory against the node's RAM (replay.checkHost): the
// processor's save_on_cpu copies of TestProcessorCPUOffload (12,544 B on
// its one GPU) pass a node of exactly that RAM, fail one byte less with a
// hint naming the processor's cpu_offload (not offload(), which the plan
// does not use), and, with no host_memory given, a note says the node's
// need and that nothing checked it.
func TestProcessorOffloadAgainstHostRAM(t *testing.T) {
	const need = 12_544 // TestProcessorCPUOffload's pinned blocks
	for _, c := range []struct {
		ram           int64
		err, hint     string
		noteUnchecked bool
	}{
		{ram: 0, noteUnchecked: true},
		{ram: need},
		{ram: need - 1, err: "offload needs 12.25 KiB of host memory per node (1 GPU) but host_memory is 12.25 KiB",
			hint: "cpu_offload=False"},
	} {
		p := gtProcessorPlan(t, "fp16-mixed", 1, "train")
		p.Members = 1
		p.Model.Layers[0].(*graph.GraphTransformerProcessor).CPUOffload = true
		p.HostMemory = c.ram
		r, err := Evaluate(p, core.Options{})
		if c.err != "" {
			var ue *units.Error
			if !errors.As(err, &ue) || ue.Msg != c.err || !strings.Contains(ue.Hint, c.hint) {
				t.Errorf("host_memory=%d: error %v, want %q with a hint naming %q", c.ram, err, c.err, c.hint)
			}
			continue
		}
		if err != nil {
			t.Fatalf("host_memory=%d: %v", c.ram, err)
		}
		unchecked := false
		for _, n := range r.Notes {
			if strings.HasPrefix(n, "host memory unchecked: a node needs 12.25 KiB of host RAM") {
				unchecked = true
			}
		}
		if unchecked != c.noteUnchecked || r.HostMemory != need {
			t.Errorf("host_memory=%d: host memory %d (want %d), unchecked note %v (want %v): %q",
				c.ram, r.HostMemory, need, unchecked, c.noteUnchecked, r.Notes)
		}
	}
}
