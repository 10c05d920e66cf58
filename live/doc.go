// Package live serves memsh plot -http: a page with a script's charts and
// tables that re-runs the script when a file it read is saved, shows the
// tensors alive under the pointer on a memory timeline, and draws the
// timeline of a table row that is clicked. The page is plain HTML, SVG
// and a little JavaScript (page.js); the server polls the files' times.
package live
