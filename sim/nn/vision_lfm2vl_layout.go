package nn

import (
	"cmp"
	"math"
	"slices"
)

// Lfm2VlProcessor is the image options of LFM2-VL's processor
// (Lfm2VlImageProcessor in models/lfm2_vl/image_processing_lfm2_vl.py and
// Lfm2VlProcessor in processing_lfm2_vl.py, transformers 5.25.0); the
// patch and the downsample factor are the tower's.
type Lfm2VlProcessor struct {
	Tile      int64   // tile_size: a tile's pixels a side (512)
	MinTokens int64   // min_image_tokens (64)
	MaxTokens int64   // max_image_tokens (256)
	MinTiles  int64   // min_tiles (2)
	MaxTiles  int64   // max_tiles (10)
	Thumbnail bool    // use_thumbnail (true): a split image's thumbnail after its tiles
	NoSplit   bool    // do_image_splitting=False: every image one resized image
	Tolerance float64 // max_pixels_tolerance (2.0)
	// NoTags is use_image_special_tokens=False: no <|image_start|>,
	// <|image_end|>, tile or thumbnail tokens around the image tokens.
	NoTags bool
}

// Lfm2VlProcessorDefaults is Lfm2VlImageProcessor's class defaults.
var Lfm2VlProcessorDefaults = Lfm2VlProcessor{Tile: 512, MinTokens: 64, MaxTokens: 256, MinTiles: 2, MaxTiles: 10, Thumbnail: true, Tolerance: 2}

// Lfm2VlLayout is how the processor lays out one image: Split into Rows x
// Cols tiles of Tile pixels (and the thumbnail), or not; H x W the pixels
// smart_resize gives the single image or the thumbnail.
type Lfm2VlLayout struct {
	Split      bool
	Rows, Cols int64
	H, W       int64
}

// Layout is Lfm2VlImageProcessor._get_split_layout for an image of h x w
// pixels, with patch the encoder's patch and f the downsample factor: the
// image is split when it is too large (_is_image_too_large: its size
// rounded to multiples of patch x f holds more than max_image_tokens x
// (patch x f)² x max_pixels_tolerance pixels) and splitting is on (not
// min_tiles = max_tiles = 1, which do_image_splitting=False sets), the
// grid from _get_grid_layout; H x W from smart_resize.
func (p Lfm2VlProcessor) Layout(h, w, patch, f int64) Lfm2VlLayout {
	lo, hi := p.MinTiles, p.MaxTiles
	if p.NoSplit {
		lo, hi = 1, 1
	}
	l := Lfm2VlLayout{Rows: 1, Cols: 1}
	l.H, l.W = p.smartResize(h, w, patch, f)
	if !(lo == 1 && hi == 1) && p.tooLarge(h, w, patch, f) {
		l.Split = true
		l.Cols, l.Rows = closestRatio(float64(w)/float64(h), targetRatios(lo, hi), w, h, p.Tile)
	}
	return l
}

// roundByFactor is round_by_factor: Python's round (half to even) of n / f,
// times f.
func roundByFactor(n, f int64) int64 { return int64(math.RoundToEven(float64(n)/float64(f))) * f }

// smartResize is Lfm2VlImageProcessor.smart_resize: both sides multiples
// of patch x f, the pixels between min_image_tokens and max_image_tokens
// times (patch x f)², the aspect ratio kept as near as the rounding lets.
func (p Lfm2VlProcessor) smartResize(h, w, patch, f int64) (int64, int64) {
	tf := patch * f
	lo, hi := float64(p.MinTokens*tf*tf), float64(p.MaxTokens*tf*tf)
	hb, wb := max(tf, roundByFactor(h, tf)), max(tf, roundByFactor(w, tf))
	fh, fw, ft := float64(h), float64(w), float64(tf)
	switch {
	case float64(hb*wb) > hi:
		beta := math.Sqrt(fh * fw / hi)
		hb, wb = max(tf, int64(math.Floor(fh/beta/ft))*tf), max(tf, int64(math.Floor(fw/beta/ft))*tf)
	case float64(hb*wb) < lo:
		beta := math.Sqrt(lo / (fh * fw))
		hb, wb = int64(math.Ceil(fh*beta/ft))*tf, int64(math.Ceil(fw*beta/ft))*tf
	}
	return hb, wb
}

// tooLarge is _is_image_too_large.
func (p Lfm2VlProcessor) tooLarge(h, w, patch, f int64) bool {
	tf := patch * f
	hb, wb := max(patch, roundByFactor(h, tf)), max(patch, roundByFactor(w, tf))
	return float64(hb*wb) > float64(p.MaxTokens*tf*tf)*p.Tolerance
}

// targetRatios is _target_ratios: the grids (cols, rows) of lo to hi
// tiles, by their tiles. Python sorts a set by the tiles alone, which
// leaves grids of as many tiles in the set's order; they are sorted by
// cols here, which differs only where two such grids tie exactly in
// closestRatio.
func targetRatios(lo, hi int64) [][2]int64 {
	var rs [][2]int64
	for w := int64(1); w <= hi; w++ {
		for h := int64(1); h <= hi; h++ {
			if n := w * h; lo <= n && n <= hi {
				rs = append(rs, [2]int64{w, h})
			}
		}
	}
	slices.SortStableFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0]*a[1], b[0]*b[1]) })
	return rs
}

// closestRatio is find_closest_aspect_ratio: the grid whose cols / rows is
// nearest the image's aspect ratio (width / height), a later grid of as
// near a ratio when the image's area is over half the grid's pixels.
func closestRatio(aspect float64, ratios [][2]int64, w, h, tile int64) (cols, rows int64) {
	best, bestDiff := [2]int64{1, 1}, math.Inf(1)
	area := float64(w * h)
	for _, r := range ratios {
		diff := math.Abs(aspect - float64(r[0])/float64(r[1]))
		if diff < bestDiff {
			best, bestDiff = r, diff
		} else if diff == bestDiff && area > 0.5*float64(tile*tile*r[0]*r[1]) {
			best = r
		}
	}
	return best[0], best[1]
}
