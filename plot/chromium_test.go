package plot

import (
	"bytes"
	"image"
	"image/color"
	"os"
	"testing"

	"github.com/memsh/memsh/sim/replay"
)

// chromium is where Debian's chromium package installs the browser.
const chromium = "/usr/bin/chromium"

// TestTimelineInChromium renders the quickstart-like timeline in headless
// Chromium and checks the screenshot shows the drawing: the categories'
// fills, the recompute and optimizer phases in the strip, and the
// optimizer step's temporaries. Skipped without Chromium. With
// MEMSH_PLOT_DIR set, the SVG and PNG are kept there for a person to look
// at.
func TestTimelineInChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skip("no " + chromium + " (apt-get install chromium)")
	}
	dir := os.Getenv("MEMSH_PLOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	r := quickstartReport(t, "RTX-4090", 16)
	var b bytes.Buffer
	must(t, WriteSVG(&b, []Chart{{Title: "gpt-350m on RTX-4090: batch 16 x seq 1024, bf16-mixed, adamw(), full checkpointing", Report: r}}))
	img := screenshot(t, dir, "quickstart_timeline", b.Bytes())

	count := func(hex string, in image.Rectangle) int {
		want := parseHex(hex)
		n := 0
		for y := in.Min.Y; y < in.Max.Y; y++ {
			for x := in.Min.X; x < in.Max.X; x++ {
				if near(img.At(x, y), want) {
					n++
				}
			}
		}
		return n
	}
	plotArea := image.Rect(padLeft, plotTop, Width-padRight, plotBot)
	stripArea := image.Rect(padLeft, stripTop, Width-padRight, stripBot)
	share := minPhaseShare
	optWidth := int(share * float64(Width-padLeft-padRight)) // the optimizer step, widened
	optimizer := image.Rect(Width-padRight-optWidth+2, plotTop, Width-padRight, plotBot)

	// Not blank: a good part of the plot area is drawn on.
	white := count("#FFFFFF", plotArea)
	if frac := 1 - float64(white)/float64(plotArea.Dx()*plotArea.Dy()); frac < 0.25 {
		t.Errorf("only %.0f%% of the plot area is drawn", 100*frac)
	}
	for _, tc := range []struct {
		what string
		hex  string
		in   image.Rectangle
		min  int
	}{
		{"params fill", categoryColor["params"], plotArea, 5000},
		{"optimizer state fill", categoryColor["optimizer"], plotArea, 5000},
		{"activations fill (forward ramp, recompute)", categoryColor["activations"], plotArea, 2000},
		{"temporaries fill", categoryColor["temporaries"], plotArea, 300},
		{"forward in the strip", phaseColor[replay.PhaseForward], stripArea, 1000},
		{"recompute in the strip", phaseColor[replay.PhaseRecompute], stripArea, 200},
		{"optimizer in the strip", phaseColor[replay.PhaseOptimizer], stripArea, 200},
		{"the optimizer step's temporaries", categoryColor["temporaries"], optimizer, 100},
		{"peak line and point", colorPeak, plotArea, 20},
	} {
		if n := count(tc.hex, tc.in); n < tc.min {
			t.Errorf("%s: %d pixels of %s, want at least %d", tc.what, n, tc.hex, tc.min)
		}
	}
}

func parseHex(s string) color.RGBA {
	v, _ := hexByte(s[1:3])
	g, _ := hexByte(s[3:5])
	b, _ := hexByte(s[5:7])
	return color.RGBA{R: v, G: g, B: b, A: 255}
}

func hexByte(s string) (uint8, bool) {
	var n uint8
	for _, c := range s {
		n <<= 4
		switch {
		case c >= '0' && c <= '9':
			n |= uint8(c - '0')
		case c >= 'A' && c <= 'F':
			n |= uint8(c - 'A' + 10)
		case c >= 'a' && c <= 'f':
			n |= uint8(c - 'a' + 10)
		default:
			return 0, false
		}
	}
	return n, true
}

// near says whether c is want within a small tolerance per channel
// (colour management may shift a fill by a unit or two).
func near(c color.Color, want color.RGBA) bool {
	r, g, b, _ := c.RGBA()
	d := func(x uint32, y uint8) bool {
		v := int(x>>8) - int(y)
		return v >= -3 && v <= 3
	}
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}
