package importers

import (
	"math"
	"strings"

	"go.starlark.net/syntax"
)

// binary is Python's binary operators on what memsh computes: and, or,
// arithmetic, comparisons and in; a value memsh does not compute makes
// the result one too.
func (e *pyEval) binary(env *pyEnv, x *syntax.BinaryExpr) (any, error) {
	l, err := e.expr(env, x.X)
	if err != nil {
		return nil, err
	}
	if x.Op == syntax.AND || x.Op == syntax.OR { // Python's: the deciding operand
		b, ok := pyTruth(l)
		if !ok {
			return pyOpaque{describe(l) + " " + x.Op.String() + " ..."}, nil
		}
		if b == (x.Op == syntax.OR) {
			return l, nil
		}
		return e.expr(env, x.Y)
	}
	r, err := e.expr(env, x.Y)
	if err != nil {
		return nil, err
	}
	_, lo := l.(pyOpaque)
	_, ro := r.(pyOpaque)
	if lo || ro {
		return pyOpaque{"an expression of " + describe(l) + " and " + describe(r)}, nil
	}
	switch x.Op {
	case syntax.EQL, syntax.NEQ:
		eq, ok := pyEqual(l, r)
		if !ok {
			return pyOpaque{"a comparison"}, nil
		}
		return eq == (x.Op == syntax.EQL), nil
	case syntax.IN, syntax.NOT_IN:
		var in bool
		switch c := r.(type) {
		case []any:
			for _, y := range c {
				if eq, _ := pyEqual(l, y); eq {
					in = true
				}
			}
		case map[string]any:
			s, _ := l.(string)
			_, in = c[s]
		case string:
			s, ok := l.(string)
			if !ok {
				return nil, e.errAt(x.OpPos, "in a string needs a string, got %s", describe(l))
			}
			in = strings.Contains(c, s)
		default:
			return nil, e.errAt(x.OpPos, "in %s", describe(r))
		}
		return in == (x.Op == syntax.IN), nil
	case syntax.LT, syntax.GT, syntax.LE, syntax.GE:
		a, aok := pyNumber(l)
		b, bok := pyNumber(r)
		if !aok || !bok {
			return nil, e.errAt(x.OpPos, "%s compares %s and %s", x.Op, describe(l), describe(r))
		}
		return map[syntax.Token]bool{syntax.LT: a < b, syntax.GT: a > b, syntax.LE: a <= b, syntax.GE: a >= b}[x.Op], nil
	}
	return e.arith(x.OpPos, x.Op, l, r)
}

func pyNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func pyEqual(a, b any) (bool, bool) {
	if x, ok := pyNumber(a); ok {
		if y, ok := pyNumber(b); ok {
			return x == y, true
		}
	}
	switch x := a.(type) {
	case nil:
		return b == nil, true
	case string:
		y, ok := b.(string)
		return ok && x == y, true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false, true
		}
		for i := range x {
			if eq, known := pyEqual(x[i], y[i]); !known || !eq {
				return eq, known
			}
		}
		return true, true
	case *pyObj:
		return a == b, true
	}
	return false, false
}

// pyMaxLen bounds the strings and lists + builds (a config's are short;
// a function doubling one on each call is not a config).
const pyMaxLen = 1 << 16

// arith is + - * / // % on numbers (and + on strings and lists).
func (e *pyEval) arith(pos syntax.Position, op syntax.Token, l, r any) (any, error) {
	if _, ok := l.(pyOpaque); ok {
		return pyOpaque{"arithmetic on " + describe(l)}, nil
	}
	if _, ok := r.(pyOpaque); ok {
		return pyOpaque{"arithmetic on " + describe(r)}, nil
	}
	if op == syntax.PLUS {
		if a, ok := l.(string); ok {
			if b, ok := r.(string); ok {
				if len(a)+len(b) > pyMaxLen {
					return nil, e.errAt(pos, "a string longer than %d bytes", pyMaxLen)
				}
				return a + b, nil
			}
		}
		if a, ok := l.([]any); ok {
			if b, ok := r.([]any); ok {
				if len(a)+len(b) > pyMaxLen {
					return nil, e.errAt(pos, "a list longer than %d items", pyMaxLen)
				}
				return append(append([]any{}, a...), b...), nil
			}
		}
	}
	a, aInt := l.(int64)
	b, bInt := r.(int64)
	if aInt && bInt {
		switch op {
		case syntax.PLUS:
			return a + b, nil
		case syntax.MINUS:
			return a - b, nil
		case syntax.STAR:
			if a != 0 && (a*b)/a != b {
				return nil, e.errAt(pos, "the product %d x %d overflows", a, b)
			}
			return a * b, nil
		case syntax.SLASHSLASH, syntax.PERCENT:
			if b == 0 {
				return nil, e.errAt(pos, "a division by zero")
			}
			q, m := a/b, a%b
			if m != 0 && (m < 0) != (b < 0) { // Python floors
				q, m = q-1, m+b
			}
			if op == syntax.SLASHSLASH {
				return q, nil
			}
			return m, nil
		}
	}
	x, xok := pyNumber(l)
	y, yok := pyNumber(r)
	if !xok || !yok {
		return nil, e.errAt(pos, "%s of %s and %s", op, describe(l), describe(r))
	}
	switch op {
	case syntax.PLUS:
		return x + y, nil
	case syntax.MINUS:
		return x - y, nil
	case syntax.STAR:
		return x * y, nil
	case syntax.SLASH, syntax.SLASHSLASH, syntax.PERCENT:
		if y == 0 {
			return nil, e.errAt(pos, "a division by zero")
		}
		switch op {
		case syntax.SLASH:
			return x / y, nil
		case syntax.SLASHSLASH:
			return math.Floor(x / y), nil
		}
		return x - y*math.Floor(x/y), nil
	}
	return nil, e.errAt(pos, "the operator %s", op)
}
