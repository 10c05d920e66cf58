package hf

import "bytes"

// PythonJSON is the one rewrite of config.json as Python writes it, for
// every reader of one (hf_config here, the importers' --model): Python's
// json module writes the floats JSON has no literal for as Infinity,
// -Infinity and NaN (json.dumps(allow_nan=True), the default), and real
// config.json files carry them: Mamba2's "time_step_limit": [0.0,
// Infinity]. PythonJSON rewrites them outside strings into JSON that
// encoding/json reads: ±Infinity as ±1e999, a number Python's json reads
// back as ±inf (json.loads("1e999") == float("inf")) and a json.Number
// that overflows to ±Inf read as a float, so a reader must take an
// overflowing number as ±Inf, not refuse it; NaN as the string "NaN" (no
// JSON number is NaN; a getter that wants a number or a name then names
// it). at maps an offset in the rewritten text back to the input, for
// error positions.
func PythonJSON(data []byte) (out []byte, at func(int64) int64) {
	type edit struct{ pos, delta int64 } // input offset of a rewrite, and how much longer the output is after it
	var edits []edit
	var b bytes.Buffer
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		ch := data[i]
		if inString {
			b.WriteByte(ch)
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			continue
		}
		if ch == '"' {
			inString = true
			b.WriteByte(ch)
			continue
		}
		rest := data[i:]
		for _, r := range pyConstants {
			if bytes.HasPrefix(rest, []byte(r.py)) && !identByte(rest, len(r.py)) && (i == 0 || !identByte(data, i-1)) {
				b.WriteString(r.json)
				edits = append(edits, edit{int64(i + len(r.py)), int64(len(r.json) - len(r.py))})
				i += len(r.py) - 1
				goto next
			}
		}
		b.WriteByte(ch)
	next:
	}
	if len(edits) == 0 {
		return data, func(off int64) int64 { return off }
	}
	return b.Bytes(), func(off int64) int64 {
		shift := int64(0)
		for _, e := range edits {
			if off-shift-e.delta < e.pos {
				break
			}
			shift += e.delta
		}
		return off - shift
	}
}

var pyConstants = []struct{ py, json string }{
	{"-Infinity", "-1e999"},
	{"Infinity", "1e999"},
	{"NaN", `"NaN"`},
}

// identByte reports whether data[i] continues an identifier (so that
// "NaNx" or a key named Infinity in a malformed file is left alone).
func identByte(data []byte, i int) bool {
	if i < 0 || i >= len(data) {
		return false
	}
	c := data[i]
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
