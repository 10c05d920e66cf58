package snapshot

import (
	"bytes"
	"io"
	"testing"
)

// FuzzRead feeds Read arbitrary bytes (seeded with a snapshot memsh
// writes and a few hostile pickles): it returns a snapshot or an error,
// never panics, and what it returns compares with itself and renders.
func FuzzRead(f *testing.F) {
	var good bytes.Buffer
	if err := sample().Write(&good); err != nil {
		f.Fatal(err)
	}
	f.Add(good.Bytes())
	f.Add([]byte("cos\nsystem\n(S'echo pwned'\ntR."))
	f.Add([]byte("(dp0\nS'segments'\np1\n(lp2\nsS'device_traces'\np3\n(lp4\n(lp5\nass."))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Read(data)
		if err != nil {
			return
		}
		c := Compare(s, s)
		if len(c.Sizes) != 0 || c.Measured.PeakAllocated != c.Predicted.PeakAllocated {
			t.Fatalf("a snapshot differs from itself: %+v", c)
		}
		if err := c.Render(io.Discard); err != nil {
			t.Fatal(err)
		}
		s.Peaks()
	})
}
