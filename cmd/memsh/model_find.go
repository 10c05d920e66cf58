package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/memsh/memsh/importers"
)

// findModel is memsh check's importers.Options.FindModel: the
// config.json of a model a trainer's config names (model_name_or_path,
// Axolotl's base_model) where transformers' from_pretrained reads it,
// when --model gives none and memsh's zoo has no model of that name.
//
//   - A folder of that name under the working directory (from_pretrained
//     takes a name that is a folder as the model's own files:
//     os.path.isdir first), whose config.json is read. A folder outside
//     the working directory (an absolute path, "..") is not read, as no
//     file a config names outside its own folder is: --model says it.
//   - Else a Hub id ("Qwen/Qwen3-8B"): the Hugging Face cache's copy of
//     it, the snapshot its refs/main names (the revision from_pretrained
//     loads by default), or the cache's only snapshot when it has no
//     refs/main. The cache is where huggingface_hub keeps it
//     (constants.py, huggingface_hub 2.4.0): $HF_HUB_CACHE, else
//     $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
//     $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub;
//     a repository's folder is "models--" and its id with "/" as "--"
//     (file_download.py repo_folder_name).
//
// dir is the config's folder: the path the plan script reads is relative
// to it, or absolute with its repository's folder allowed to the
// script's reads (a snapshot's config.json is a link into the
// repository's blobs).
func (e *env) findModel(dir string) func(name string) (importers.FoundModel, error) {
	return func(name string) (importers.FoundModel, error) {
		if fi, err := os.Stat(name); err == nil && fi.IsDir() {
			return e.modelFolder(dir, name)
		}
		if !hubID.MatchString(name) || strings.Contains(name, "--") || strings.Contains(name, "..") {
			if filepath.IsAbs(name) || strings.HasPrefix(filepath.ToSlash(name), "../") {
				return importers.FoundModel{Looked: outside(name)}, nil
			}
			return importers.FoundModel{Looked: fmt.Sprintf("memsh found no folder %s under the working directory, and it is not a Hub id", name)}, nil
		}
		cache := hfHubCache(e.getenv)
		if cache == "" {
			return importers.FoundModel{Looked: "memsh found no Hugging Face cache: no HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME or HOME names one"}, nil
		}
		return e.modelInCache(cache, name)
	}
}

// hubID is a Hub repository id as huggingface_hub's REPO_ID_REGEX takes
// it (utils/_validators.py, 2.4.0): an optional namespace and a name of
// ASCII letters, digits, "_", "-" and ".", at most 96 each, starting and
// ending with a letter, digit or "_"; "--" and ".." are refused besides.
var hubID = regexp.MustCompile(`^([A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?/)?[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$`)

// outside says why memsh read no model folder outside the working
// directory.
func outside(name string) string {
	return fmt.Sprintf("memsh reads no model folder outside the working directory (%s)", name)
}

// hfHubCache is the folder of huggingface_hub's cache ("" when the
// environment names no home).
func hfHubCache(getenv func(string) string) string {
	for _, k := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if v := getenv(k); v != "" {
			return v
		}
	}
	if v := getenv("HF_HOME"); v != "" {
		return filepath.Join(v, "hub")
	}
	if v := getenv("XDG_CACHE_HOME"); v != "" {
		return filepath.Join(v, "huggingface", "hub")
	}
	if v := getenv("HOME"); v != "" {
		return filepath.Join(v, ".cache", "huggingface", "hub")
	}
	return ""
}

// modelFolder reads the config.json of a model folder under the working
// directory.
func (e *env) modelFolder(dir, name string) (importers.FoundModel, error) {
	if !filepath.IsLocal(filepath.Clean(name)) {
		return importers.FoundModel{Looked: outside(name)}, nil
	}
	file := path.Join(filepath.ToSlash(filepath.Clean(name)), "config.json")
	data, err := readNamedConfig(".", file)
	if err != nil {
		return importers.FoundModel{}, fmt.Errorf("the model folder %s: %v", name, err)
	}
	rel, err := e.modelPath(dir, file)
	if err != nil {
		return importers.FoundModel{}, err
	}
	return importers.FoundModel{Path: rel, Data: data, From: "the model folder " + name}, nil
}

// modelInCache reads the config.json of Hub id id from the Hugging Face
// cache at cache.
func (e *env) modelInCache(cache, id string) (importers.FoundModel, error) {
	repo := "models--" + strings.ReplaceAll(id, "/", "--")
	fetch := " (hf download " + id + " config.json fetches it)"
	looked := importers.FoundModel{Looked: "memsh looked in the Hugging Face cache, " + filepath.Join(cache, repo) + ": not there" + fetch}
	root, err := os.OpenRoot(cache)
	if err != nil {
		return looked, nil
	}
	defer root.Close()
	if fi, err := root.Stat(repo); err != nil || !fi.IsDir() {
		return looked, nil
	}
	rev, how, err := cacheRevision(root, repo)
	if err != nil {
		return importers.FoundModel{}, fmt.Errorf("the Hugging Face cache, %s: %v", filepath.Join(cache, repo), err)
	}
	if rev == "" {
		looked.Looked = "memsh looked in the Hugging Face cache, " + filepath.Join(cache, repo) + ": no refs/main, and not one snapshot (--model names the one to read)"
		return looked, nil
	}
	file := path.Join(repo, "snapshots", rev, "config.json")
	if _, err := root.Stat(file); errors.Is(err, fs.ErrNotExist) {
		looked.Looked = "memsh looked in the Hugging Face cache, " + filepath.Join(cache, file) + ": not there" + fetch
		return looked, nil
	}
	data, err := readNamedConfig(cache, file)
	if err != nil {
		return importers.FoundModel{}, fmt.Errorf("the Hugging Face cache: %v", err)
	}
	abs, err := filepath.Abs(filepath.Join(cache, file))
	if err != nil {
		return importers.FoundModel{}, err
	}
	// The snapshot's file links into the repository's blobs: the script
	// may read the repository's folder.
	e.reads.dirs = append(e.reads.dirs, filepath.Join(filepath.Dir(abs), "..", ".."))
	return importers.FoundModel{Path: filepath.ToSlash(abs), Data: data, From: fmt.Sprintf("the Hugging Face cache, %s (%s)", filepath.ToSlash(abs), how)}, nil
}

// cacheRevision is the snapshot of repo from_pretrained loads: the one
// refs/main names, else the only one; "" when neither says.
func cacheRevision(root *os.Root, repo string) (rev, how string, err error) {
	if data, err := readRootFile(root, path.Join(repo, "refs", "main"), 256); err == nil {
		rev := strings.TrimSpace(string(data))
		if !filepath.IsLocal(rev) || strings.ContainsAny(rev, `/\`) {
			return "", "", fmt.Errorf("refs/main names %q, not a revision", rev)
		}
		return rev, "refs/main", nil
	}
	dir, err := root.Open(path.Join(repo, "snapshots"))
	if err != nil {
		return "", "", nil
	}
	defer dir.Close()
	names, err := dir.Readdirnames(2)
	if err != nil || len(names) != 1 {
		return "", "", nil
	}
	return names[0], "its only snapshot", nil
}

// readRootFile reads a small regular file of root.
func readRootFile(root *os.Root, name string, limit int64) ([]byte, error) {
	fi, err := root.Stat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("%s is not a small regular file", name)
	}
	return root.ReadFile(name)
}
