package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The pixel budgets of GLM-4.1V's processors, their classes' defaults in
// transformers 5.25.0 (a checkpoint's preprocessor_config.json, which
// memsh does not read, may set others): Glm4vImageProcessor.size
// {"shortest_edge": 112 * 112, "longest_edge": 28 * 28 * 15000} and
// Glm4vVideoProcessor.size {"shortest_edge": 112 * 112, "longest_edge":
// 28 * 28 * 2 * 30000}, in pixels over all of a resize's frames.
const (
	glmMinPixels   = 112 * 112
	glmImagePixels = 28 * 28 * 15000
	glmVideoPixels = 28 * 28 * 2 * 30000
)

// resize is the h x w pixels smart_resize (image_processing_glm4v.py and
// video_processing_glm4v.py, 5.25.0) gives frames frames of h x w pixels
// under maxPixels: an image too small a side scaled up to patch*merge
// pixels (truncated), each side rounded to a multiple of patch*merge
// (Python's round: halves to even), then, when the frames (rounded to a
// multiple of temporal) hold more than maxPixels or fewer than
// glmMinPixels, both sides scaled by the same factor (floored, at least
// patch*merge; or ceiled). Images count temporal frames (the processor's
// num_frames=temporal_patch_size); a video its own.
func (v *Glm4vVisionTower) resize(frames, h, w, maxPixels int64) (int64, int64, error) {
	factor := float64(v.Patch * v.Merge)
	fh, fw := float64(h), float64(w)
	if fh < factor || fw < factor {
		s := max(factor/fh, factor/fw)
		fh, fw = math.Trunc(fh*s), math.Trunc(fw*s)
	}
	if max(fh, fw)/min(fh, fw) > 200 {
		return 0, 0, fmt.Errorf("%dx%d pixels: the processor refuses an aspect ratio over 200", h, w)
	}
	hb, wb := math.RoundToEven(fh/factor)*factor, math.RoundToEven(fw/factor)*factor
	tb := math.RoundToEven(float64(frames)/float64(v.Temporal)) * float64(v.Temporal)
	n := float64(frames) * fh * fw
	switch {
	case tb*hb*wb > float64(maxPixels):
		beta := math.Sqrt(n / float64(maxPixels))
		hb, wb = max(factor, math.Floor(fh/beta/factor)*factor), max(factor, math.Floor(fw/beta/factor)*factor)
	case tb*hb*wb < glmMinPixels:
		beta := math.Sqrt(glmMinPixels / n)
		hb, wb = math.Ceil(fh*beta/factor)*factor, math.Ceil(fw*beta/factor)*factor
	}
	return int64(hb), int64(wb), nil
}

// inputs is the tower's run in this step: the plan's images or its videos,
// resized as the processors resize them; none without either.
func (v *Glm4vVisionTower) inputs(b *core.Builder) []visualInput {
	fail := func(msg, hint string) {
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""), Msg: msg, Hint: hint}})
	}
	im, vd := b.Images, b.Videos
	if im.Count > 0 && vd.Count > 0 {
		fail("GLM-4V's tower takes images or videos in a step, not both",
			"transformers' Glm4vModel.get_placeholder_mask finds a video's tokens by image_token_id, so with images among them the counts disagree; train images and videos in separate steps")
	}
	var in visualInput
	var maxPixels int64
	switch {
	case im.Count > 0:
		in, maxPixels = imageInput(b), glmImagePixels
		in.h, in.w = im.Height, im.Width
	case vd.Count > 0:
		if vd.Frames < v.Temporal {
			fail(fmt.Sprintf("a video of %s: the processor needs at least temporal_patch_size (%d)", units.Count(vd.Frames, "frame"), v.Temporal),
				"Glm4vVideoProcessor samples an even number of frames; give frames=2 or more")
		}
		in, maxPixels = videoInput(b, v.Temporal), glmVideoPixels
		in.text = vd.Count * glm4vVideoText(vd.Frames, videoGroups(vd.Frames, v.Temporal), vd.FPS)
	default:
		return nil
	}
	frames := v.Temporal
	if in.kind == "video" {
		frames = vd.Frames
	}
	h, w, err := v.resize(frames, in.h, in.w, maxPixels)
	if err != nil {
		fail(err.Error(), "use images of an aspect ratio of at most 200")
	}
	in.h, in.w = h, w
	ins := []visualInput{in}
	fitSequence(b, ins, v.frameTokens)
	return ins
}

// glm4vVideoText is the text tokens Glm4vProcessor.replace_video_token
// (transformers 5.25.0) writes for a video of frames frames (groups
// temporal patch groups) sampled fps a second besides its image tokens:
// each group's tokens between begin_of_image and end_of_image, then its
// timestamp, int(t) in seconds, t that of every second sampled frame
// (metadata.timestamps[::2], frame i at i/fps; the last repeated when
// fewer than the groups). GLM-4's tokenizer splits a number into runs of
// at most three digits (its pre-tokenizer's \p{N}{1,3}), a token each.
func glm4vVideoText(frames, groups int64, fps float64) int64 {
	stamps := (frames + 1) / 2
	var n int64
	for g := int64(0); g < groups; g++ {
		i := 2 * min(g, stamps-1)
		digits := int64(len(core.Itoa(int64(float64(i) / fps))))
		n += 2 + (digits+2)/3
	}
	return n
}
