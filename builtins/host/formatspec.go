package host

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
)

// format(value, spec): Python's format-spec mini-language
// (https://docs.python.org/3/library/string.html#formatspec), which
// Starlark's % operator and str.format lack: widths, alignment,
// precision, signs and thousands separators.

// maxSpecWidth bounds a spec's width and precision: a script cannot ask
// for a string of a gigabyte of padding.
const maxSpecWidth = 10_000

// FormatBuiltins is format().
func FormatBuiltins() []Builtin {
	return []Builtin{{
		Name: "format",
		Sig:  "format(value, spec=\"\")",
		Doc: "Formats a number or string by Python's format-spec mini-language, which Starlark's % and str.format " +
			"lack: format(3.14159, \".2f\") is \"3.14\". The spec is " +
			"[[fill]align][sign][z][#][0][width][grouping][.precision][type]: format(1234567, \",\") is \"1,234,567\", " +
			"format(0.4312, \".1%\") is \"43.1%\", format(-3, \"+05d\") is \"-0003\", format(255, \"#x\") is \"0xff\", " +
			"format(\"gpu\", \"<8\") is gpu and five spaces, format(42, \"*>6\") is \"****42\" (fill * instead of spaces). align is < (left, strings' default), > (right, numbers' " +
			"default), ^ (centre) or = (pad after the sign); sign is +, - or space; z turns -0.0 into 0.0; # adds " +
			"0b, 0o or 0x (it applies to b, o, x and X only); 0 pads numbers with zeros; grouping is , or _; " +
			"types: s for strings; d, b, o, x, X, c, n for ints; e, E, f, F, g, G, n, % for floats (an int takes " +
			"them too). An empty spec is str(value). Bools print True and False (as 1 and 0 with a numeric type); " +
			"None and other values print as str() with a string spec. Width and precision are at most 10000.",
		Fn: formatFn,
	}}
}

func formatFn(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	spec := ""
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "value", &v, "spec?", &spec); err != nil {
		return nil, err
	}
	s, err := FormatSpec(v, spec)
	if err != nil {
		return nil, err
	}
	return starlark.String(s), nil
}

// spec is a parsed format spec.
type spec struct {
	fill      rune
	fillGiven bool
	align     byte // 0, '<', '>', '^', '='
	sign      byte // 0, '+', '-', ' '
	z         bool
	alt       bool
	zero      bool
	width     int
	grouping  byte // 0, ',', '_'
	precision int  // -1 when not given
	typ       byte // 0 when not given
	text      string
}

// parseSpec reads [[fill]align][sign][z][#][0][width][grouping][.precision][type].
func parseSpec(s string) (spec, error) {
	p := spec{fill: ' ', precision: -1, text: s}
	bad := func(why string) error { return fmt.Errorf("format: bad spec %q: %s", s, why) }
	rest := s
	if r, n := utf8.DecodeRuneInString(rest); n > 0 && len(rest) > n && strings.IndexByte("<>=^", rest[n]) >= 0 {
		p.fill, p.fillGiven, p.align, rest = r, true, rest[n], rest[n+1:]
	} else if len(rest) > 0 && strings.IndexByte("<>=^", rest[0]) >= 0 {
		p.align, rest = rest[0], rest[1:]
	}
	if len(rest) > 0 && strings.IndexByte("+- ", rest[0]) >= 0 {
		p.sign, rest = rest[0], rest[1:]
	}
	if strings.HasPrefix(rest, "z") {
		p.z, rest = true, rest[1:]
	}
	if strings.HasPrefix(rest, "#") {
		p.alt, rest = true, rest[1:]
	}
	if strings.HasPrefix(rest, "0") {
		p.zero, rest = true, rest[1:]
	}
	num := func() (int, bool, error) {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			return 0, false, nil
		}
		n, err := strconv.Atoi(rest[:i])
		rest = rest[i:]
		if err != nil || n > maxSpecWidth {
			return 0, true, bad(fmt.Sprintf("widths and precisions are at most %d", maxSpecWidth))
		}
		return n, true, nil
	}
	var err error
	if p.width, _, err = num(); err != nil {
		return p, err
	}
	if len(rest) > 0 && (rest[0] == ',' || rest[0] == '_') {
		p.grouping, rest = rest[0], rest[1:]
	}
	if strings.HasPrefix(rest, ".") {
		rest = rest[1:]
		n, ok, err := num()
		if err != nil {
			return p, err
		}
		if !ok {
			return p, bad("a precision is digits after the dot")
		}
		p.precision = n
	}
	if len(rest) == 1 && strings.IndexByte("sdbcoxXneEfFgG%", rest[0]) >= 0 {
		p.typ, rest = rest[0], ""
	}
	if rest != "" {
		return p, bad(fmt.Sprintf("unexpected %q (the spec is [[fill]align][sign][z][#][0][width][grouping][.precision][type])", rest))
	}
	if p.zero && !p.fillGiven {
		p.fill = '0'
		if p.align == 0 {
			p.align = '='
		}
	}
	return p, nil
}

// FormatSpec formats v by Python's format-spec mini-language.
func FormatSpec(v starlark.Value, s string) (string, error) {
	p, err := parseSpec(s)
	if err != nil {
		return "", err
	}
	if b, ok := v.(starlark.Bool); ok {
		if p.typ == 0 || p.typ == 's' {
			v = starlark.String(b.String())
		} else {
			v = starlark.MakeInt(map[bool]int{false: 0, true: 1}[bool(b)])
		}
	}
	switch x := v.(type) {
	case starlark.Int:
		if p.typ != 0 && strings.IndexByte("eEfFgG%", p.typ) >= 0 {
			return p.float(float64(x.Float()))
		}
		return p.int(x.BigInt())
	case starlark.Float:
		return p.float(float64(x))
	case starlark.String:
		return p.str(string(x))
	}
	return p.str(v.String())
}

// str formats a string: type s, precision truncates, left-aligned.
func (p spec) str(s string) (string, error) {
	switch {
	case p.typ != 0 && p.typ != 's':
		return "", fmt.Errorf("format: type %q in spec %q needs a number (got a string)", p.typ, p.text)
	case p.sign != 0 || p.z || p.alt || p.grouping != 0 || p.align == '=':
		return "", fmt.Errorf("format: spec %q: a sign, z, #, grouping and = alignment apply to numbers, not strings", p.text)
	}
	if p.precision >= 0 && utf8.RuneCountInString(s) > p.precision {
		s = string([]rune(s)[:p.precision])
	}
	return p.pad("", s, '<'), nil
}

// int formats an integer with type d, n, b, o, x, X or c.
func (p spec) int(n *big.Int) (string, error) {
	if p.precision >= 0 {
		return "", fmt.Errorf("format: spec %q: an int takes no precision with an integer type (use .2f for a float)", p.text)
	}
	if p.z {
		return "", fmt.Errorf("format: spec %q: z applies to floats", p.text)
	}
	base, prefix := 10, ""
	switch p.typ {
	case 0, 'd', 'n':
	case 'b':
		base, prefix = 2, "0b"
	case 'o':
		base, prefix = 8, "0o"
	case 'x':
		base, prefix = 16, "0x"
	case 'X':
		base, prefix = 16, "0X"
	case 'c':
		if p.sign != 0 || p.alt || p.grouping != 0 {
			return "", fmt.Errorf("format: spec %q: type c takes no sign, # or grouping", p.text)
		}
		if !n.IsInt64() || n.Int64() < 0 || n.Int64() > utf8.MaxRune {
			return "", fmt.Errorf("format: type c needs a code point in 0..%d (got %s)", utf8.MaxRune, n)
		}
		return p.pad("", string(rune(n.Int64())), '>'), nil
	default:
		return "", fmt.Errorf("format: type %q in spec %q does not apply to an int (types: d, b, o, x, X, c, n, or e, f, g, %%)", p.typ, p.text)
	}
	if p.alt && base == 10 {
		return "", fmt.Errorf("format: spec %q: # applies to b, o, x and X", p.text)
	}
	if !p.alt {
		prefix = ""
	}
	if p.grouping == ',' && base != 10 {
		return "", fmt.Errorf("format: spec %q: , groups decimal numbers (use _ with b, o, x and X)", p.text)
	}
	digits := new(big.Int).Abs(n).Text(base)
	if p.typ == 'X' {
		digits = strings.ToUpper(digits)
	}
	group := 3
	if base != 10 {
		group = 4
	}
	sign := p.signOf(n.Sign() < 0) + prefix
	return p.pad(sign, p.groupDigits(digits, group, len(sign)), '>'), nil
}

// float formats a float with type e, E, f, F, g, G, n or %, or none.
func (p spec) float(f float64) (string, error) {
	if p.alt {
		return "", fmt.Errorf("format: spec %q: # applies to b, o, x and X", p.text)
	}
	if p.typ != 0 && strings.IndexByte("eEfFgGn%", p.typ) < 0 {
		return "", fmt.Errorf("format: type %q in spec %q does not apply to a float (types: e, E, f, F, g, G, n, %%)", p.typ, p.text)
	}
	neg := math.Signbit(f)
	if p.z && f == 0 || math.IsNaN(f) {
		neg = false
	}
	a := math.Abs(f)
	prec := p.precision
	var body, suffix string
	switch {
	case math.IsInf(f, 0) || math.IsNaN(f):
		body = "inf"
		if math.IsNaN(f) {
			body = "nan"
		}
		if p.typ == 'E' || p.typ == 'F' || p.typ == 'G' {
			body = strings.ToUpper(body)
		}
		if p.typ == '%' {
			suffix = "%"
		}
		return p.pad(p.signOf(neg), body+suffix, '>'), nil
	case p.typ == 'f' || p.typ == 'F':
		body = strconv.FormatFloat(a, 'f', orDefault(prec, 6), 64)
	case p.typ == '%':
		body, suffix = strconv.FormatFloat(a*100, 'f', orDefault(prec, 6), 64), "%"
	case p.typ == 'e' || p.typ == 'E':
		body = strconv.FormatFloat(a, 'e', orDefault(prec, 6), 64)
	case p.typ == 'g' || p.typ == 'G' || p.typ == 'n':
		body = strconv.FormatFloat(a, 'g', max(orDefault(prec, 6), 1), 64)
	case prec >= 0: // no type, a precision: g that keeps a digit after the point
		body = strconv.FormatFloat(a, 'g', max(prec, 1), 64)
		if !strings.ContainsAny(body, ".e") {
			body += ".0"
		}
	default: // no type, no precision: str(f)
		body = starlark.Float(a).String()
	}
	if p.typ == 'E' || p.typ == 'G' {
		body = strings.ToUpper(body)
	}
	// Group the integer digits.
	intEnd := strings.IndexAny(body, ".eE")
	if intEnd < 0 {
		intEnd = len(body)
	}
	sign := p.signOf(neg)
	body = p.groupDigits(body[:intEnd], 3, len(sign)+len(body)-intEnd+len(suffix)) + body[intEnd:]
	return p.pad(sign, body+suffix, '>'), nil
}

func orDefault(n, d int) int {
	if n < 0 {
		return d
	}
	return n
}

// signOf is the sign to write before a number.
func (p spec) signOf(neg bool) string {
	switch {
	case neg:
		return "-"
	case p.sign == '+':
		return "+"
	case p.sign == ' ':
		return " "
	}
	return ""
}

// groupDigits puts the grouping character between every group digits,
// from the right. Padded with zeros after the sign, the zeros are grouped
// too, as Python does ("0,001,234" for 09,d); others (the sign, the
// fraction) take the rest of the width.
func (p spec) groupDigits(digits string, group, others int) string {
	if p.grouping == 0 {
		return digits
	}
	if p.align == '=' && p.fill == '0' {
		for n := len(digits); others+n+(n-1)/group < p.width; n = len(digits) {
			digits = "0" + digits
		}
	}
	var b strings.Builder
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%group == 0 {
			b.WriteByte(p.grouping)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// pad fills the value out to the width: sign and prefix, then the body,
// aligned by p.align or def.
func (p spec) pad(sign, body string, def byte) string {
	n := utf8.RuneCountInString(sign) + utf8.RuneCountInString(body)
	if n >= p.width {
		return sign + body
	}
	fill := strings.Repeat(string(p.fill), p.width-n)
	align := p.align
	if align == 0 {
		align = def
	}
	switch align {
	case '<':
		return sign + body + fill
	case '^':
		k := (p.width - n) / 2
		return fill[:k*len(string(p.fill))] + sign + body + fill[k*len(string(p.fill)):]
	case '=':
		return sign + fill + body
	}
	return fill + sign + body
}
