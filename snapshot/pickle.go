package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"

	ogorek "github.com/kisielk/og-rek"
)

// Write writes s as the pickle torch.cuda.memory._dump_snapshot() writes
// (protocol 4, as Python's pickle.dump defaults to).
func (s *Snapshot) Write(w io.Writer) error {
	segs := make([]any, len(s.Segments))
	for i, g := range s.Segments {
		blocks := make([]any, len(g.Blocks))
		for j, b := range g.Blocks {
			blocks[j] = map[any]any{
				"address": b.Address, "size": b.Size, "requested_size": b.RequestedSize,
				"state": b.State, "frames": frames(b.Frames),
			}
		}
		segs[i] = map[any]any{
			"device": int64(0), "address": g.Address, "total_size": g.TotalSize,
			"allocated_size": g.AllocatedSize, "active_size": g.AllocatedSize, "requested_size": g.RequestedSize,
			"stream": g.Stream, "segment_type": g.SegmentType, "segment_pool_id": ogorek.Tuple{int64(0), int64(0)},
			"is_expandable": g.Expandable, "frames": []any{}, "blocks": blocks,
		}
	}
	trace := make([]any, len(s.Trace))
	for i, e := range s.Trace {
		trace[i] = map[any]any{
			"action": e.Action, "addr": e.Addr, "size": e.Size, "stream": e.Stream,
			"time_us": e.TimeUS, "frames": frames(e.Frames),
		}
	}
	doc := map[any]any{
		"segments":      segs,
		"device_traces": []any{trace},
	}
	enc := ogorek.NewEncoderWithConfig(w, &ogorek.EncoderConfig{Protocol: 4})
	return enc.Encode(doc)
}

func frames(fs []Frame) []any {
	out := make([]any, len(fs))
	for i, f := range fs {
		out[i] = map[any]any{"name": f.Name, "filename": f.Filename, "line": f.Line}
	}
	return out
}

// Read parses a snapshot pickle. Only data is decoded (dicts, lists,
// tuples, strings, numbers, booleans, None); a pickle that names a class or
// a callable (the opcodes that make pickle.load construct objects or run
// code) is refused, as is a truncated or malformed one. The caller bounds
// the size of data.
func Read(data []byte) (*Snapshot, error) {
	v, err := ogorek.NewDecoder(bytes.NewReader(data)).Decode()
	if err != nil {
		return nil, fmt.Errorf("not a PyTorch memory snapshot (a pickle): %v", err)
	}
	if err := plainData(v, 0); err != nil {
		return nil, err
	}
	root, ok := v.(map[any]any)
	if !ok {
		return nil, fmt.Errorf("not a PyTorch memory snapshot: the pickle holds a %T, not a dict", v)
	}
	r := reader{}
	s := &Snapshot{}
	for _, sv := range r.list(root, "segments") {
		sd := r.dict(sv, "segment")
		g := Segment{Address: r.int(sd, "address"), TotalSize: r.int(sd, "total_size"),
			AllocatedSize: r.optInt(sd, "allocated_size"), RequestedSize: r.optInt(sd, "requested_size"),
			Stream: r.optInt(sd, "stream"), SegmentType: r.optString(sd, "segment_type"), Expandable: r.optBool(sd, "is_expandable")}
		for _, bv := range r.list(sd, "blocks") {
			bd := r.dict(bv, "block")
			g.Blocks = append(g.Blocks, Block{Address: r.optInt(bd, "address"), Size: r.int(bd, "size"),
				RequestedSize: r.optInt(bd, "requested_size"), State: r.string(bd, "state"), Frames: r.frames(bd)})
		}
		s.Segments = append(s.Segments, g)
	}
	traces := r.list(root, "device_traces")
	for _, tv := range traces {
		t, ok := tv.([]any)
		if !ok {
			r.fail("device_traces: want a list per device, got %T", tv)
			break
		}
		if len(t) == 0 {
			continue
		}
		if len(s.Trace) > 0 {
			r.fail("device_traces: more than one device holds a trace (memsh compares one GPU)")
			break
		}
		for _, ev := range t {
			ed := r.dict(ev, "trace entry")
			s.Trace = append(s.Trace, Event{Action: r.string(ed, "action"), Addr: r.optInt(ed, "addr"),
				Size: r.optInt(ed, "size"), Stream: r.optInt(ed, "stream"), TimeUS: r.optInt(ed, "time_us"), Frames: r.frames(ed)})
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("not a PyTorch memory snapshot: %v", r.err)
	}
	return s, nil
}

// maxDepth bounds the nesting of a snapshot (a dict of lists of dicts of
// frames is depth 5); deeper data is not a snapshot.
const maxDepth = 16

// plainData refuses anything but the data types a snapshot holds.
func plainData(v any, depth int) error {
	if depth > maxDepth {
		return errors.New("not a PyTorch memory snapshot: nested too deeply")
	}
	switch x := v.(type) {
	case map[any]any:
		for k, e := range x {
			if err := plainData(k, depth+1); err != nil {
				return err
			}
			if err := plainData(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := plainData(e, depth+1); err != nil {
				return err
			}
		}
	case ogorek.Tuple:
		for _, e := range x {
			if err := plainData(e, depth+1); err != nil {
				return err
			}
		}
	case string, int64, float64, bool, ogorek.None, *big.Int, ogorek.Bytes, ogorek.ByteString, []byte, nil:
	case ogorek.Class:
		return fmt.Errorf("refused: the pickle names the class %s.%s; a memory snapshot holds only data", x.Module, x.Name)
	case ogorek.Call:
		return fmt.Errorf("refused: the pickle calls %s.%s; a memory snapshot holds only data", x.Callable.Module, x.Callable.Name)
	default:
		return fmt.Errorf("refused: the pickle holds a %T; a memory snapshot holds only data", v)
	}
	return nil
}

// reader takes fields out of decoded dicts, keeping the first error.
type reader struct{ err error }

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *reader) dict(v any, what string) map[any]any {
	d, ok := v.(map[any]any)
	if !ok {
		r.fail("%s: want a dict, got %T", what, v)
	}
	return d
}

func (r *reader) list(d map[any]any, key string) []any {
	v, ok := d[key]
	if !ok {
		r.fail("no %q", key)
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		r.fail("%q: want a list, got %T", key, v)
	}
	return l
}

func (r *reader) int(d map[any]any, key string) int64 {
	if _, ok := d[key]; !ok {
		r.fail("no %q", key)
		return 0
	}
	return r.optInt(d, key)
}

func (r *reader) optInt(d map[any]any, key string) int64 {
	switch x := d[key].(type) {
	case nil:
		return 0
	case int64:
		return x
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		r.fail("%q: %s does not fit in 64 bits", key, x)
	case bool:
		if x {
			return 1
		}
		return 0
	default:
		r.fail("%q: want an int, got %T", key, x)
	}
	return 0
}

func (r *reader) string(d map[any]any, key string) string {
	if _, ok := d[key]; !ok {
		r.fail("no %q", key)
		return ""
	}
	return r.optString(d, key)
}

func (r *reader) optString(d map[any]any, key string) string {
	switch x := d[key].(type) {
	case nil:
		return ""
	case string:
		return x
	case ogorek.ByteString:
		return string(x)
	}
	r.fail("%q: want a string, got %T", key, d[key])
	return ""
}

func (r *reader) optBool(d map[any]any, key string) bool {
	b, _ := d[key].(bool)
	return b
}

func (r *reader) frames(d map[any]any) []Frame {
	l, _ := d["frames"].([]any)
	out := make([]Frame, 0, len(l))
	for _, fv := range l {
		fd := r.dict(fv, "frame")
		out = append(out, Frame{Name: r.optString(fd, "name"), Filename: r.optString(fd, "filename"), Line: r.optInt(fd, "line")})
	}
	return out
}
