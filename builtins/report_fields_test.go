package builtins

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/memsh/memsh/builtins/reports"
	"github.com/memsh/memsh/jsondoc"
)

// TestReportFieldsDeclaredOnce holds every place that shows a report field
// to reportFields: the attributes, as_dict and the JSON schema (the json
// tags of jsondoc.Report), docs/json.md's table of the report, and
// simulate()'s doc.
func TestReportFieldsDeclaredOnce(t *testing.T) {
	var dict, attrs []string
	doc := reports.SimulateDoc()
	for _, f := range reports.ReportFields {
		if f.Doc == "" || !strings.Contains(doc, "- "+f.Name+": "+f.Doc) {
			t.Errorf("simulate()'s doc lacks %s", f.Name)
		}
		if f.Dict != nil {
			dict = append(dict, f.Name)
		}
		if f.Attr != nil {
			attrs = append(attrs, f.Name)
		}
		if f.Attr == nil && f.Dict == nil {
			t.Errorf("field %s is neither an attribute nor in as_dict", f.Name)
		}
	}
	var tags []string
	rt := reflect.TypeOf(jsondoc.Report{})
	for i := 0; i < rt.NumField(); i++ {
		tags = append(tags, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	sort.Strings(dict)
	sort.Strings(tags)
	if d := cmp.Diff(dict, tags); d != "" {
		t.Errorf("as_dict fields (-) and jsondoc.Report's json tags (+) differ:\n%s", d)
	}
	md, err := os.ReadFile("../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	report := string(md)
	if i := strings.Index(report, "## The report"); i >= 0 {
		report = report[i:]
	}
	for _, name := range dict {
		if !strings.Contains(report, "| `"+name+"` |") {
			t.Errorf("docs/json.md's report table lacks `%s`", name)
		}
	}
	names := (&reports.Report{}).AttrNames()
	for _, a := range attrs {
		if !slices.Contains(names, a) {
			t.Errorf("attribute %s missing from AttrNames", a)
		}
	}
}
