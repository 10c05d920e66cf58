package main

import (
	"os"
)

// readFlags are the folders given with --allow-read: scripts may read the
// files under them (load, hf_config, :load) besides their own folder tree,
// by a path from the loading file ("../configs/llama.json") or an absolute
// path. Each folder is confined as the script's own tree is: no "..", no
// symlink out of it, regular files only.
type readFlags struct {
	dirs []string
}

// add records one --allow-read value.
func (r *readFlags) add(dir string) error {
	if dir == "" {
		return usagef("--allow-read needs a folder")
	}
	r.dirs = append(r.dirs, dir)
	return nil
}

// check rejects a --allow-read value that is not a folder.
func (r *readFlags) check() error {
	for _, d := range r.dirs {
		fi, err := os.Stat(d)
		if err != nil {
			return usagef("invalid --allow-read value %q: %v", d, unwrapPath(err))
		}
		if !fi.IsDir() {
			return usagef("invalid --allow-read value %q: not a folder", d)
		}
	}
	return nil
}
