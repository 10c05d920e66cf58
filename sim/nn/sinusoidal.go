package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// SinusoidalPositions adds a fixed sinusoidal position table to its input
// (XGLMSinusoidalPositionalEmbedding, models/xglm/modeling_xglm.py at
// transformers 5.25.0): the table is a non-persistent buffer, weights, of
// Rows x Dim (max_position_embeddings + the offset of 2 rows), cast with
// the model; forward index_selects the [1, seq, Dim] rows of position_ids
// + 2 and detaches them (no gradient: the add saves nothing), and
// make_weights regrows the table when 2 + seq passes it. No parameters.
type SinusoidalPositions struct {
	Name      string // the table's module ("embed_positions")
	Rows, Dim int64
	Offset    int64 // rows before position 0 (XGLM's 2)
}

func (p *SinusoidalPositions) Kind() string           { return "sinusoidal_positions" }
func (p *SinusoidalPositions) Label() string          { return p.Name }
func (p *SinusoidalPositions) DefaultName() string    { return "" } // its module holds the table; the add runs in the parent
func (p *SinusoidalPositions) Children() []core.Layer { return nil }
func (p *SinusoidalPositions) Params() int64          { return 0 }
func (p *SinusoidalPositions) InDim() int64           { return p.Dim }
func (p *SinusoidalPositions) OutDim() int64          { return p.Dim }
func (p *SinusoidalPositions) Summary() string {
	return fmt.Sprintf("sinusoidal table %d x %d (a buffer), added", p.Rows, p.Dim)
}

func (p *SinusoidalPositions) Validate(path string) error {
	if p.Rows <= 0 || p.Dim <= 0 || p.Offset < 0 || p.Offset >= p.Rows {
		return units.Errorf(path, "a sinusoidal table needs positive rows and width and an offset below the rows (got %d x %d, offset %d)", p.Rows, p.Dim, p.Offset)
	}
	return nil
}

func (p *SinusoidalPositions) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != p.Dim {
		panic(core.ShapeMismatch(b, "sinusoidal_positions", p.Dim, b.Last(x)))
	}
	s := b.Shape(x)
	seq := s[len(s)-2]
	done := b.Scope(p.Name)
	b.Buffer("weights", []int64{max(p.Rows, p.Offset+seq), p.Dim}, b.Prec.Params,
		"the sinusoidal position table (a non-persistent buffer, cast with the model; regrown past max_position_embeddings)")
	i := b.AddOp("index_select", "positions", nil)
	pos := b.Out(i, "positions", []int64{1, seq, p.Dim}, b.Prec.Params, "the rows of the positions, detached (no gradient)")
	b.Val(pos).Grad = false
	b.Op(i).NoGradB = true
	b.Op(i).Bytes = float64(b.Val(pos).Bytes) * 2
	done()
	return b.Add("positions", x, pos)
}
