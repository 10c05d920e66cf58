package units

import "testing"

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		noun string
		want string
	}{
		{1, "image", "1 image"},
		{2, "image", "2 images"},
		{0, "image", "0 images"},
		{-1, "image", "-1 images"},
		{1, "video", "1 video"},
		{8, "frame", "8 frames"},
		{1, "tile", "1 tile"},
		{14, "tile", "14 tiles"},
		{1, "patch", "1 patch"},
		{1024, "patch", "1024 patches"},
		{2, "box", "2 boxes"},
		{2, "pass", "2 passes"},
		{2, "mesh", "2 meshes"},
		{2, "image patch", "2 image patches"},
	} {
		if got := Count(tc.n, tc.noun); got != tc.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}
