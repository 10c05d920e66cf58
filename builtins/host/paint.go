package host

import "github.com/fatih/color"

// Styles of coloured output, for Paint.
var (
	StyleBold   = []color.Attribute{color.Bold}
	StyleError  = []color.Attribute{color.Bold, color.FgRed}
	StyleRed    = []color.Attribute{color.FgRed}
	StyleYellow = []color.Attribute{color.FgYellow}
	StyleGreen  = []color.Attribute{color.FgGreen}
	StyleCyan   = []color.Attribute{color.FgCyan}
	StyleDim    = []color.Attribute{color.Faint}
)

// Paint styles s with fatih/color when on, and returns it unchanged
// otherwise. Whether to colour is decided by the caller (the run's --color
// and NO_COLOR, or a terminal), never by fatih/color's global detection.
func Paint(on bool, style []color.Attribute, s string) string {
	if !on || s == "" {
		return s
	}
	c := color.New(style...)
	c.EnableColor()
	return c.Sprint(s)
}
