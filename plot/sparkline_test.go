package plot

import "testing"

func TestSparkline(t *testing.T) {
	for _, tc := range []struct {
		name          string
		tl            []any
		width         int
		spark, phases string
	}{
		// Five events in ten columns: setup, forward and backward get 2, 4
		// and 4 columns (their shares of the events), repeating events.
		// Peak 80: 10 is 1/8 (▁), 40 is 4/8 (▄), 80 is █, 41 rounds up
		// to 5/8 (▅), 0 is blank.
		{"levels", []any{"setup", 10, "forward", 40, "forward", 80, "backward", 41, "backward", 0}, 10,
			"▁▁▄▄██▅▅  ", "s for back"},
		// One column per event (20 in 20; no phase under 5%). Recompute
		// counts as backward in the names; each name is cut to leave a
		// gap before the next.
		{"names", []any{"setup", 10, "setup", 10, "setup", 10, "setup", 10,
			"forward", 20, "forward", 30, "forward", 40, "forward", 50, "forward", 60, "forward", 70, "forward", 80, "forward", 80,
			"backward", 70, "recompute", 75, "backward", 60, "backward", 50, "recompute", 55, "backward", 40,
			"optimizer", 45, "optimizer", 30}, 20,
			"▁▁▁▁▂▃▄▅▆▇██▇█▆▅▆▄▅▃", "set forward backw op"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spark, phases := Sparkline(pts(tc.tl...), tc.width)
			if spark != tc.spark {
				t.Errorf("spark = %q, want %q", spark, tc.spark)
			}
			if tc.phases != "" && phases != tc.phases {
				t.Errorf("phases = %q, want %q", phases, tc.phases)
			}
		})
	}
	if s, p := Sparkline(nil, 60); s != "" || p != "" {
		t.Errorf("empty timeline: %q %q", s, p)
	}
}
