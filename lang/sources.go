package lang

// SourceMap gives the text of the files an error may point into, by the
// file name used in positions.
type SourceMap interface {
	Source(filename string) ([]byte, bool)
}

// MapSource is a SourceMap over a map, for tests and tools.
type MapSource map[string][]byte

// Source implements SourceMap.
func (m MapSource) Source(filename string) ([]byte, bool) {
	b, ok := m[filename]
	return b, ok
}

// Source implements SourceMap over every file and chunk the interpreter
// executed.
func (in *Interpreter) Source(filename string) ([]byte, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	b, ok := in.sources[filename]
	return b, ok
}

// AddSource records the text of a file or REPL chunk ("<stdin:3>") so that
// errors can quote it.
func (in *Interpreter) AddSource(filename string, src []byte) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.sources[filename] = src
}
