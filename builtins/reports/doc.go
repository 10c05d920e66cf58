// Package reports holds simulate() and the report value: its fields are
// declared once (report_fields.go) and give the attributes, r.as_dict(),
// the JSON document and sweep()'s figure columns; render_report.go draws
// the table print(r) shows. table_steps() replays a series of steps.
package reports
