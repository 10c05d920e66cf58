package nn

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// What a tower reads in a step: the images of train(images=) or the
// videos of train(videos=). transformers' Qwen2.5-VL, Qwen3-VL and Qwen3.5
// run a video through the same tower as an image (get_video_features):
// the video processor pads its frames to a multiple of temporal_patch_size
// by repeating the last and cuts each group of temporal_patch_size frames
// into patches as an image's one frame (twice) is cut (video_grid_thw =
// (groups, h, w)); the tower attends within each group as within an image
// (get_vision_cu_seqlens: h x w patches a segment, t segments a video),
// Qwen2.5-VL's windows tile each group (get_vision_window_index), Qwen3-VL's
// pos_embed is resampled for each (get_vision_interpolation_indices_and_
// weights). A video's tokens replace its video placeholders as an image's
// do (masked_scatter under input_ids == video_token_id), and Qwen3-VL's
// deepstack features go to their positions. Qwen2.5-VL's mrope positions
// step by second_per_grid_ts along the groups: the same position ids, no
// tensor more. With both images and videos the tower runs twice, images
// first (Qwen2_5_VLModel.forward, Qwen3VLModel.forward): the same
// weights, each run's own tensors, the video tokens joined after the
// image tokens (core.SharedCalls).

// visualInput is one run of a tower: frames of h x w pixels per sample
// (the images, or every video's temporal patch groups), with the text
// tokens the processor writes around them (text, per sample).
type visualInput struct {
	kind         string // "image" or "video"
	frames, h, w int64
	text         int64
	what         string // the input as the user gave it, for errors
}

// pixels is the name of the tower's input: the processor's pixel_values
// or pixel_values_videos.
func (in visualInput) pixels() string {
	if in.kind == "video" {
		return "pixel_values_videos"
	}
	return "pixel_values"
}

// imageInput is the plan's images.
func imageInput(b *core.Builder) visualInput {
	im := b.Images
	return visualInput{kind: "image", frames: im.Count, h: im.Height, w: im.Width,
		what: fmt.Sprintf("%s of %dx%d pixels", units.Count(im.Count, "image"), im.Height, im.Width)}
}

// towerInputs are the runs of a Qwen tower whose patches span temporal
// frames: the plan's images, then its videos; none without either. stamps
// adds the text Qwen3VLProcessor writes around each group of a video's
// frames (videoText). tokens is the tokens a frame of h x w pixels makes;
// all the runs' tokens and text must fit the sequence.
func towerInputs(b *core.Builder, temporal int64, stamps bool, tokens func(h, w int64) int64) []visualInput {
	var ins []visualInput
	if b.Images.Count > 0 {
		ins = append(ins, imageInput(b))
	}
	if vd := b.Videos; vd.Count > 0 {
		in := videoInput(b, temporal)
		if stamps {
			in.text = vd.Count * videoText(vd.Frames, temporal, vd.FPS)
		}
		ins = append(ins, in)
	}
	fitSequence(b, ins, tokens)
	return ins
}

// fitSequence refuses runs whose tokens (tokens of a frame of h x w
// pixels, and their text) are more than the sequence.
func fitSequence(b *core.Builder, ins []visualInput, tokens func(h, w int64) int64) {
	var n int64
	var what, kinds []string
	for _, in := range ins {
		n += in.frames*tokens(in.h, in.w) + in.text
		what, kinds = append(what, in.what), append(kinds, in.kind)
	}
	if n > b.Seq {
		k := strings.Join(kinds, " and ")
		panic(core.LowerError{Err: &units.Error{Path: b.Name(""),
			Msg:  fmt.Sprintf("%s: %d %s tokens a sample, more than seq=%d", strings.Join(what, " and "), n, k, b.Seq),
			Hint: "seq counts the " + k + " tokens with the text: raise seq, or use fewer or smaller " + strings.Join(kinds, "s or ") + "s"}})
	}
}

// videoInput is the plan's videos, each a run of its temporal patch
// groups.
func videoInput(b *core.Builder, temporal int64) visualInput {
	vd := b.Videos
	return visualInput{kind: "video", frames: vd.Count * videoGroups(vd.Frames, temporal), h: vd.Height, w: vd.Width,
		what: fmt.Sprintf("%s of %s of %dx%d pixels", units.Count(vd.Count, "video"), units.Count(vd.Frames, "frame"), vd.Height, vd.Width)}
}

// videoGroups is the temporal patch groups of a video of frames frames:
// the video processor pads them to a multiple of temporal by repeating
// the last (Qwen2VLVideoProcessor and Qwen3VLVideoProcessor, patchify).
func videoGroups(frames, temporal int64) int64 { return (frames + temporal - 1) / temporal }

// videoText is the text tokens Qwen3VLProcessor.replace_video_token
// (transformers 5.25.0) writes for a video of frames frames sampled fps a
// second besides its video tokens: before each temporal patch group its
// timestamp "<t seconds>" (t the mean time of the group's first and last
// frames, frame i at i/fps, the last frame repeated to fill the group, as
// _calculate_timestamps computes it; one decimal), and the group between
// vision_start and vision_end. A timestamp is a token a digit (Qwen2's
// pre-tokenizer splits every digit) and four more: "<", ".", " seconds"
// and ">".
func videoText(frames, temporal int64, fps float64) int64 {
	var n int64
	for first := int64(0); first < frames; first += temporal {
		last := min(first+temporal-1, frames-1)
		t := (float64(first)/fps + float64(last)/fps) / 2
		digits := int64(len(strconv.FormatFloat(t, 'f', 1, 64))) - 1
		n += digits + 4 + 2
	}
	return n
}
