package host

import (
	"errors"
	"fmt"
	"testing"

	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/syntax"
)

func TestWithOrigin(t *testing.T) {
	name := "plan.star"
	pos := syntax.MakePosition(&name, 12, 9)
	base := &units.Error{Path: "attn", Msg: "tp=3 does not divide 32 heads"}

	got := WithOrigin(base, pos)
	var se *units.Error
	if !errors.As(got, &se) || se.Origin != "plan.star:12:9" || base.Origin != "" {
		t.Fatalf("direct: %#v (base %#v)", se, base)
	}

	wrapped := fmt.Errorf("simulate: %w", base)
	got = WithOrigin(wrapped, pos)
	se = nil
	if !errors.As(got, &se) || se.Origin != "plan.star:12:9" || got.Error() != wrapped.Error() {
		t.Fatalf("wrapped: %v %#v", got, se)
	}

	plain := errors.New("plain")
	if WithOrigin(plain, pos) != plain {
		t.Fatal("plain error changed")
	}
	if WithOrigin(base, syntax.Position{}) != error(base) {
		t.Fatal("invalid position changed the error")
	}
	if PosString(syntax.Position{}) != "" || PosString(pos) != "plan.star:12:9" {
		t.Fatal("PosString")
	}
}
