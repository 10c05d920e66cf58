package importers

import (
	"bytes"
	"encoding/json"
)

// jsonKeyLines is the line of each key of a JSON document, by its dotted
// path as the tree holds it (an object's keys under their parent's, none
// inside a list, whose items the tree keeps as one value), so that a JSON
// config's errors name their line as a YAML one's do. A document that
// does not decode gives what it read before the error.
func jsonKeyLines(data []byte) map[string]int {
	type frame struct {
		object, wantKey bool
		path            string // the object's own path
		key             string // the last key read in it
	}
	lines := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []frame
	inList := 0      // how many lists hold the current value
	done := func() { // a value of the frame on top is read
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return lines
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			path := ""
			if n := len(stack); n > 0 && stack[n-1].object {
				path = join(stack[n-1].path, stack[n-1].key)
			}
			object := tok == json.Delim('{')
			if !object {
				inList++
			}
			stack = append(stack, frame{object: object, wantKey: object, path: path})
			continue
		case json.Delim('}'), json.Delim(']'):
			if !stack[len(stack)-1].object {
				inList--
			}
			stack = stack[:len(stack)-1]
			done()
			continue
		}
		if len(stack) == 0 { // a document that is one scalar
			continue
		}
		top := &stack[len(stack)-1]
		if key, ok := tok.(string); ok && top.object && top.wantKey {
			top.key, top.wantKey = key, false
			if inList == 0 {
				lines[join(top.path, key)] = 1 + bytes.Count(data[:dec.InputOffset()], []byte("\n"))
			}
			continue
		}
		done()
	}
}
