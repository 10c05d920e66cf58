package builtins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/builtins/tables"
	"github.com/memsh/memsh/jsondoc"
	"go.starlark.net/starlark"
)

// JSONDocument returns e as one line of `memsh run --json` (a
// jsondoc.Doc, documented in docs/json.md), without the newline. A
// report's fields are those of r.as_dict(), a table's rows those of
// t.as_dicts(); any other value is written as json.encode writes it.
func JSONDocument(thread *starlark.Thread, e host.Emitted) ([]byte, error) {
	doc := jsondoc.Doc{Version: jsondoc.Version, Label: e.Label, At: host.PosString(e.At)}
	if r, ok := e.Value.(*reports.Report); ok {
		rep, err := ReportDocument(thread, r)
		if err != nil {
			return nil, err
		}
		doc.Kind, doc.Report = jsondoc.KindReport, rep
	} else if t, ok := e.Value.(*tables.ResultTable); ok {
		tab, err := tables.TableDocument(thread, t, e.Chart)
		if err != nil {
			return nil, err
		}
		doc.Kind, doc.Table = jsondoc.KindTable, tab
	} else {
		s, err := host.EncodeJSON(thread, e.Value)
		if err != nil {
			return nil, fmt.Errorf("cannot emit %s: %v", e.Value.Type(), err)
		}
		doc.Kind, doc.Value = jsondoc.KindValue, json.RawMessage(s)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // plans and op names read better with < and > as they are
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ReportDocument converts r to the schema's Report through r.as_dict(),
// so that the JSON and the Starlark dict cannot disagree.
func ReportDocument(thread *starlark.Thread, r *reports.Report) (*jsondoc.Report, error) {
	s, err := host.EncodeJSON(thread, r.AsDict())
	if err != nil {
		return nil, fmt.Errorf("internal error: report as JSON: %v", err)
	}
	var rep jsondoc.Report
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields() // a report field missing from the schema is an error, not a silent drop
	if err := dec.Decode(&rep); err != nil {
		return nil, fmt.Errorf("internal error: report as JSON: %v", err)
	}
	return &rep, nil
}
