package snapshot

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sample() *Snapshot {
	f := []Frame{{Name: "layers.0.attn.q_proj", Filename: "matmul", Line: 0}}
	return &Snapshot{
		Segments: []Segment{{Address: 1 << 32, TotalSize: 20 << 20, AllocatedSize: 1024, RequestedSize: 1000,
			SegmentType: "large", Blocks: []Block{
				{Address: 1 << 32, Size: 1024, RequestedSize: 1000, State: "active_allocated", Frames: f},
				{Address: 1<<32 + 1024, Size: 20<<20 - 1024, State: "inactive"},
			}}},
		Trace: []Event{
			{Action: SegmentAlloc, Addr: 1 << 32, Size: 20 << 20},
			{Action: Alloc, Addr: 1 << 32, Size: 1024, Frames: f},
			{Action: Alloc, Addr: 1<<32 + 1024, Size: 4096, TimeUS: 1},
			{Action: FreeRequested, Addr: 1<<32 + 1024, Size: 4096, TimeUS: 2},
			{Action: FreeCompleted, Addr: 1<<32 + 1024, Size: 4096, TimeUS: 2},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	s := sample()
	if err := s.Write(&b); err != nil {
		t.Fatal(err)
	}
	got, err := Read(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	// Frames come back as empty slices where none were written.
	want := sample()
	want.Segments[0].Blocks[1].Frames = []Frame{}
	for i := range want.Trace {
		if want.Trace[i].Frames == nil {
			want.Trace[i].Frames = []Frame{}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	if a, r := got.Peaks(); a != 1024+4096 || r != 20<<20 {
		t.Errorf("peaks = %d, %d; want %d, %d", a, r, 1024+4096, 20<<20)
	}
}

// TestReadRefuses feeds Read what is not a snapshot, including pickles that
// would make Python construct objects or run code.
func TestReadRefuses(t *testing.T) {
	var good bytes.Buffer
	if err := sample().Write(&good); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"empty", "", "not a PyTorch memory snapshot (a pickle)"},
		{"text", "segments: []\n", "not a PyTorch memory snapshot (a pickle)"},
		{"truncated", good.String()[:good.Len()/2], "not a PyTorch memory snapshot (a pickle)"},
		// a pickle protocol from the future (Python writes 0 to 5)
		{"wrong version", "\x80\x09" + good.String()[2:], "not a PyTorch memory snapshot (a pickle)"},
		// protocol 0: os.system("echo pwned") via GLOBAL and REDUCE
		{"code", "cos\nsystem\n(S'echo pwned'\ntR.", "refused: the pickle calls os.system"},
		// a class reference alone
		{"class", "cbuiltins\neval\n.", "refused: the pickle names the class builtins.eval"},
		{"list", "(lp0\n.", "the pickle holds a []interface {}, not a dict"},
		{"no segments", "(dp0\n.", `no "segments"`},
		{"bad segment", "(dp0\nS'segments'\np1\n(lp2\nI1\nasS'device_traces'\np3\n(lp4\ns.", "segment: want a dict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Read([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read = %v, %v; want an error containing %q", s, err, tc.want)
			}
		})
	}
}
