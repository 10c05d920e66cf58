package nn

import (
	"fmt"
	"strconv"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// AltUpStreams makes Gemma 3n's AltUp streams from the embeddings, or
// (Unembed) their one output from the streams (Gemma3nTextModel.forward
// in transformers' models/gemma3n/modeling_gemma3n.py, 5.25.0, l.
// 1681-1694 and 1717-1730). The Streams parallel copies of the hidden
// state are carried as one [batch, seq, Streams x Dim] value (torch
// stacks them as [Streams, batch, seq, Dim]: the same bytes).
//
// Before the layers, from the scaled embedding x (stream 0):
//
//	m = mean(x**2, -1) ** 0.5
//	stream i = p * m / sqrt(clamp(mean(p**2, -1), 1e-5)), p = altup_projections[i-1](x)
//	streams = stack(x, stream 1, ...)
//
// After them the same magnitude matching with altup_unembed_projections
// reading stream i (m from stream 0), then the mean of the stacked
// streams. Each pow(2) keeps its input (after the layers, a view of the
// streams: their whole storage), pow(0.5) and clamp theirs, sqrt its
// output, the product and the division their operands.
type AltUpStreams struct {
	Dim, Streams int64
	Unembed      bool
}

func (a *AltUpStreams) Kind() string           { return "altup_streams" }
func (a *AltUpStreams) Label() string          { return "" }
func (a *AltUpStreams) DefaultName() string    { return "" } // its projections sit in the model
func (a *AltUpStreams) Children() []core.Layer { return nil }
func (a *AltUpStreams) Params() int64          { return (a.Streams - 1) * a.Dim * a.Dim }

func (a *AltUpStreams) InDim() int64 {
	if a.Unembed {
		return a.Streams * a.Dim
	}
	return a.Dim
}

func (a *AltUpStreams) OutDim() int64 {
	if a.Unembed {
		return a.Dim
	}
	return a.Streams * a.Dim
}

func (a *AltUpStreams) module() string {
	if a.Unembed {
		return "altup_unembed_projections"
	}
	return "altup_projections"
}

func (a *AltUpStreams) Summary() string {
	return fmt.Sprintf("%s: %d streams of %d", a.module(), a.Streams, a.Dim)
}

func (a *AltUpStreams) Validate(path string) error { return checkStreams(path, a.Dim, a.Streams) }

// checkStreams checks AltUp's width and stream count.
func checkStreams(path string, dim, streams int64) error {
	if err := core.Positive(path, "dim", dim); err != nil {
		return err
	}
	if streams < 2 {
		return units.Errorf(path, "AltUp needs at least 2 streams (altup_num_inputs, got %d)", streams)
	}
	return nil
}

// CheckLayout: the streams are modelled on one rank's whole hidden size.
func (a *AltUpStreams) CheckLayout(path string, par core.Parallelism) error {
	return checkNoTPCP(path, par, "Gemma 3n's AltUp streams")
}

func (a *AltUpStreams) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != a.InDim() {
		panic(core.ShapeMismatch(b, "altup_streams", a.InDim(), b.Last(x)))
	}
	one := core.WithLast(b.Shape(x), a.Dim)
	dt := b.Dtype(x)
	target := onStream(b, x, one, func() core.Value { return magnitude(b, x) })
	parts := []core.Value{x}
	done := b.Scope(a.module())
	for i := int64(1); i < a.Streams; i++ {
		p := onStream(b, x, one, func() core.Value { // the embeddings, or stream i of the streams
			return b.Linear(strconv.FormatInt(i-1, 10), core.Role(a.module()), x, a.Dim, a.Dim, false)
		})
		sq := b.Unary("pow", p, true, false)
		mean := b.Ew("mean", "mean", []core.Value{sq}, core.WithLast(one, 1), dt, "mean of the projection's squares")
		c := b.Unary("clamp", mean, true, false)
		r := b.Unary("sqrt", c, false, true)
		prod := b.Mul("target_magnitude", p, target)
		j := b.AddOp("div", "magnitude_matched", []core.Value{prod, r})
		parts = append(parts, b.Out(j, "magnitude_matched", one, dt, "a projected stream scaled to stream 0's magnitude"))
		b.Save(j, prod, r)
	}
	done()
	st := b.Ew("stack", "streams", parts, core.WithLast(one, a.Streams*a.Dim), dt, "the AltUp streams stacked (torch.stack)")
	if !a.Unembed {
		return st
	}
	return b.Ew("mean", "streams_mean", []core.Value{st}, one, dt, "the mean of the streams")
}

// magnitude is mean(x**2, -1) ** 0.5 over the last dim features of x.
func magnitude(b *core.Builder, x core.Value) core.Value {
	sq := b.Unary("pow", x, true, false)
	row := core.WithLast(b.Shape(x), 1)
	mean := b.Ew("mean", "mean", []core.Value{sq}, row, b.Dtype(x), "mean of the squares")
	return b.Unary("pow", mean, true, false)
}

// onStream runs lower with the AltUp streams v seen as one stream of
// shape one: a stream is a view of theirs (hidden_states[i]), so what an
// op saves of it is their whole storage, while the op's output has one
// stream's shape. v's shape is restored after.
func onStream(b *core.Builder, v core.Value, one []int64, lower func() core.Value) core.Value {
	full := b.Val(v).Shape
	b.Val(v).Shape = one
	defer func() { b.Val(v).Shape = full }()
	return lower()
}
