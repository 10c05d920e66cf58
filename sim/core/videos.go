package core

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/units"
)

// Videos are the videos each sample of a vision-language model carries
// (train(videos=...)): Count videos of Frames frames, sampled FPS a second,
// of Height x Width pixels, the size the model's video processor resizes
// them to. A video tower groups the frames temporal_patch_size at a time
// and runs each group as it runs an image (nn.VisionTower,
// nn.Qwen3VisionTower); its tokens join the text sequence.
type Videos struct {
	Count, Frames, Height, Width int64
	// FPS is the frames sampled a second, which decides the timestamps
	// Qwen3-VL's processor writes before each group of frames (the video
	// processors' default is 2).
	FPS float64
}

// DefaultVideoFPS is the Qwen video processors' default sampling rate
// (Qwen2VLVideoProcessor.fps and Qwen3VLVideoProcessor.fps, transformers
// 5.25.0: 2 frames a second).
const DefaultVideoFPS = 2.0

// maxVideoFrames bounds one video's frames (the Qwen video processors
// sample at most 768: max_frames).
const maxVideoFrames = 1 << 16

const hintVideos = "videos=(count, frames, height, width) or (count, frames, height, width, fps): videos per sample, the frames sampled from each, their size in pixels after the video processor's resize, and the frames sampled a second (2 by default)"

// Validate checks the sizes.
func (v Videos) Validate() error {
	if v == (Videos{}) {
		return nil
	}
	if v.Count <= 0 || v.Frames <= 0 || v.Height <= 0 || v.Width <= 0 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("videos needs a positive count, frames, height and width (got %d, %d, %d, %d)", v.Count, v.Frames, v.Height, v.Width),
			Hint: hintVideos}
	}
	if !(v.FPS > 0) || math.IsInf(v.FPS, 0) || v.FPS > 1000 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("videos' fps must be a positive number of frames a second, at most 1000 (got %g)", v.FPS), Hint: hintVideos}
	}
	if v.Height > maxImagePixels/v.Width || v.Frames > maxVideoFrames || v.Count > 1<<20 || v.Count*v.Frames > 1<<20 {
		return &units.Error{Path: "train", Msg: fmt.Sprintf("videos=(%d, %d, %d, %d) is more than memsh simulates", v.Count, v.Frames, v.Height, v.Width),
			Hint: hintVideos}
	}
	return nil
}

// VideoLayer is a layer that reads the plan's videos (a video tower).
type VideoLayer interface {
	ReadsVideos() bool
}

// VideoRefuser is an image tower whose model has a video input memsh does
// not model: VideosRefused says why and what to do instead.
type VideoRefuser interface {
	VideosRefused() (why, hint string)
}

// validateVideos checks train(videos=...) against the model: videos need
// a tower with a video input.
func (p *Plan) validateVideos() error {
	if err := p.Videos.Validate(); err != nil {
		return err
	}
	if p.Videos.Count == 0 {
		return nil
	}
	videos := p.firstLayer(func(l Layer) bool {
		v, ok := l.(VideoLayer)
		return ok && v.ReadsVideos()
	}) != nil
	images := p.firstLayer(readsImages)
	switch r, ok := images.(VideoRefuser); {
	case !videos && ok:
		why, hint := r.VideosRefused()
		return &units.Error{Path: "train", Msg: fmt.Sprintf("videos= on model %q is not modelled: %s", p.Model.Name, why), Hint: hint}
	case !videos && images != nil:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("videos= needs a model with a video input; model %q takes images only (its vision tower: %s)", p.Model.Name, images.Kind()),
			Hint: "videos are read by Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, LLaVA-OneVision, GLM-4.1V, GLM-4.5V and SmolVLM2 (hf_config of a qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_vl_moe, qwen3_5, qwen3_5_moe, llava_onevision, glm4v, glm4v_moe or smolvlm config); give this model the frames as images=(count, height, width)"}
	case !videos:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("videos= but model %q has no vision tower", p.Model.Name),
			Hint: "videos are read by Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3.5, LLaVA-OneVision, GLM-4.1V, GLM-4.5V and SmolVLM2 (hf_config of a qwen2_vl, qwen2_5_vl, qwen3_vl, qwen3_vl_moe, qwen3_5, qwen3_5_moe, llava_onevision, glm4v, glm4v_moe or smolvlm config, or vision_tower())"}
	}
	return nil
}
