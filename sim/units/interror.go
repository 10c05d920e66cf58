package units

// IntError is an *Error whose message, IntMsg(Format, its arguments), is
// written only when the error is read: a refusal that a caller may only
// count. A search refuses tens of thousands of layouts (Ulysses' heads,
// interleaved micro-batches), each refusal worded for nothing but its
// class; worded at once, those messages and errors were 9 of
// BenchmarkSearchLlama70B1024's 334 MB/op. Its text, its *Error
// (errors.As, Word) and its message (AppendMsg) are the *Error's that
// NewIntError's arguments would make with IntMsg; an API that returns
// errors to its users hands them the *Error (Worded).
type IntError struct {
	Path, Format, Hint string
	args               [2]int64
	n                  uint8 // arguments in args
}

// NewIntError is &Error{Path: path, Msg: IntMsg(format, args...), Hint:
// hint}, worded when read; at most two arguments (more make the *Error
// at once).
func NewIntError(path, format, hint string, args ...int64) error {
	if len(args) > 2 {
		return &Error{Path: path, Msg: IntMsg(format, args...), Hint: hint}
	}
	e := &IntError{Path: path, Format: format, Hint: hint, n: uint8(len(args))}
	copy(e.args[:], args)
	return e
}

// Word is e as the *Error it stands for (a new one at each call).
func (e *IntError) Word() *Error {
	return &Error{Path: e.Path, Msg: IntMsg(e.Format, e.args[:e.n]...), Hint: e.Hint}
}

func (e *IntError) Error() string { return e.Word().Error() }

// AppendMsg appends the *Error's Msg to b.
func (e *IntError) AppendMsg(b []byte) []byte { return AppendIntMsg(b, e.Format, e.args[:e.n]...) }

// As sets a **Error target to e's *Error (errors.As).
func (e *IntError) As(target any) bool {
	if t, ok := target.(**Error); ok {
		*t = e.Word()
		return true
	}
	return false
}

// Worded is err with an *IntError worded (Word): what an API hands its
// callers, who may read its fields or compare its type; any other err as
// it is.
func Worded(err error) error {
	if e, ok := err.(*IntError); ok {
		return e.Word()
	}
	return err
}
