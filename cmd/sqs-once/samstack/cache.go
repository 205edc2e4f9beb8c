package samstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Translations are cached.
//
// The SAM translator is a Python process that spends some two seconds of
// CPU importing itself for a translation that takes a fraction of that, and
// the project's tests and demo translate template.yaml dozens of times with
// the same few sets of parameters. So a translation is kept on disk, keyed
// by everything its output depends on, and read back instead of running the
// translator again.
const (
	// CacheDirEnv names the variable that, when set, is the directory
	// translations are kept in, instead of
	// $XDG_CACHE_HOME/sqs-once/sam-translate (~/.cache when unset).
	CacheDirEnv = "SQS_ONCE_SAM_CACHE_DIR"
	// NoCacheEnv names the variable that, set to anything but "" or "0",
	// turns the cache off: every template is translated, none kept.
	NoCacheEnv = "SQS_ONCE_SAM_NO_CACHE"
	// cacheKeyVersion changes when what a key covers changes, so that
	// entries kept under an older scheme are not read as current.
	cacheKeyVersion = "samstack translation 1"
)

// versionScript prints the versions of the Python packages the
// translation depends on, without importing them (a tenth of the
// translator's start-up).
const versionScript = `import importlib.metadata as m
print(m.version("aws-sam-translator"), m.version("PyYAML"), m.version("boto3"))`

// cacheEntry is where one translation is kept; its zero value (no file)
// is a cache that is off or cannot be used: read misses, write does
// nothing.
type cacheEntry struct{ file string }

// translationCache is the entry of the translation of the template at
// templatePath with params and codeURI, by the python at bin for region.
// The key covers the template's bytes (not its path: the translator reads
// nothing else of it, and the tests translate copies in directories of
// their own), the parameters, the code URI, the region, the translation
// script, the interpreter's path and the versions of the translator, PyYAML
// and boto3 (which the translator asks for the region's partition); any of
// them unreadable leaves the cache off for this translation.
func translationCache(ctx context.Context, bin, templatePath string, params map[string]string, codeURI, region string) cacheEntry {
	dir := cacheDir()
	if dir == "" {
		return cacheEntry{}
	}
	data, err := os.ReadFile(templatePath)
	if err != nil {
		return cacheEntry{}
	}
	req, err := json.Marshal(map[string]any{"parameters": params, "code_uri": codeURI})
	if err != nil {
		return cacheEntry{}
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return cacheEntry{}
	}
	cmd := exec.CommandContext(ctx, bin, "-c", versionScript)
	versions, err := cmd.Output()
	if err != nil {
		return cacheEntry{} // a package missing: the translation says which
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\nscript %d\n%s\n", cacheKeyVersion, len(translateScript), translateScript)
	fmt.Fprintf(h, "python %q\nversions %q\nregion %q\nrequest %d\n%s\ntemplate %d\n",
		real, bytes.TrimSpace(versions), region, len(req), req, len(data))
	h.Write(data)
	return cacheEntry{file: filepath.Join(dir, hex.EncodeToString(h.Sum(nil))+".json")}
}

// cacheDir is where translations are kept, from the environment; "" when
// NoCacheEnv turns the cache off or there is no home directory.
func cacheDir() string {
	if v := os.Getenv(NoCacheEnv); v != "" && v != "0" {
		return ""
	}
	if dir := os.Getenv(CacheDirEnv); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return ""
		}
		return abs
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" || !filepath.IsAbs(base) { // the XDG spec: a relative value is ignored
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "sqs-once", "sam-translate")
}

// read is the kept translation, if there is one.
func (e cacheEntry) read() ([]byte, bool) {
	if e.file == "" {
		return nil, false
	}
	out, err := os.ReadFile(e.file)
	return out, err == nil
}

// write keeps out, the translator's output, under another name first and
// renamed, so that a reader never sees a half-written entry.
func (e cacheEntry) write(out []byte) error {
	if e.file == "" {
		return nil
	}
	dir := filepath.Dir(e.file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return err
	}
	if _, err := f.Write(out); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), e.file); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}
