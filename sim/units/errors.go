package units

import "fmt"

// Error is an engine error. Origin is a preformatted "file:line:col" of the
// declaration of the offending object, filled in by the Starlark layer; Path
// names the object inside the plan ("model.layers[3].attn").
type Error struct {
	Origin string
	Path   string
	Msg    string
	Hint   string
}

func (e *Error) Error() string {
	s := e.Msg
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	return s
}

// errorf builds an *Error with a formatted message.
func Errorf(path, format string, args ...any) *Error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
}
