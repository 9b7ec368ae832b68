package initializer

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fetch runs the initializer with test timings and returns its log.
func fetch(t *testing.T, c Config) (string, error) {
	t.Helper()
	var log bytes.Buffer
	c.Log = &log
	c.RetryBase = time.Millisecond
	c.ProgressEvery = time.Hour
	err := Run(context.Background(), c)
	return log.String(), err
}

// tree maps the relative paths of the files under dir to their content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func gz(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// entries lists the names in dir (to see that no staging directory is left).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func TestFileScheme(t *testing.T) {
	src := t.TempDir()
	writeTree(t, src, map[string]string{
		"train/a.txt": "a", "train/sub/b.txt": "bb", "test.csv": "t", "notes.md": "skip", "raw/x-idx.gz": gz(t, "unzipped"),
	})
	cases := map[string]struct {
		cfg     Config
		want    map[string]string
		wantErr string
	}{
		"a directory tree": {
			cfg:  Config{StorageURI: "file://" + src},
			want: map[string]string{"train/a.txt": "a", "train/sub/b.txt": "bb", "test.csv": "t", "notes.md": "skip", "raw/x-idx.gz": gz(t, "unzipped")},
		},
		"ignore patterns match the relative path, * across /": {
			cfg:  Config{StorageURI: "file://" + src, IgnorePatterns: []string{"*.md", "train/*/b.*"}},
			want: map[string]string{"train/a.txt": "a", "test.csv": "t", "raw/x-idx.gz": gz(t, "unzipped")},
		},
		"ungzip": {
			cfg:  Config{StorageURI: "file://" + src + "/raw", Ungzip: true},
			want: map[string]string{"x-idx": "unzipped"},
		},
		"one file": {
			cfg:  Config{StorageURI: "file://" + src + "/train/sub/b.txt"},
			want: map[string]string{"b.txt": "bb"},
		},
		"missing": {
			cfg:     Config{StorageURI: "file://" + src + "/nope"},
			wantErr: "file://" + src + "/nope: stat " + src + "/nope: no such file or directory",
		},
		"everything ignored": {
			cfg:     Config{StorageURI: "file://" + src + "/train", IgnorePatterns: []string{"*"}},
			wantErr: "nothing to fetch",
		},
		"relative path": {
			cfg:     Config{StorageURI: "file://data/x"},
			wantErr: `want file:///absolute/path (host "data")`,
		},
		"unknown scheme": {
			cfg:     Config{StorageURI: "gs://bucket/x"},
			wantErr: `unsupported scheme "gs" (supported: hf, s3, file)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			tc.cfg.Kind = Dataset
			tc.cfg.Dest = filepath.Join(root, "dataset")
			_, err := fetch(t, tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				if got := entries(t, root); len(got) != 0 {
					t.Errorf("left behind after a failure: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tree(t, tc.cfg.Dest)); diff != "" {
				t.Errorf("fetched files (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"dataset"}, entries(t, root)); diff != "" {
				t.Errorf("destination's parent (-want +got):\n%s", diff)
			}
		})
	}
}

// A second run replaces what the first one fetched, and a failing run leaves
// the previous content in place.
func TestRerun(t *testing.T) {
	src, root := t.TempDir(), t.TempDir()
	dest := filepath.Join(root, "model")
	writeTree(t, src, map[string]string{"v1.json": "1"})
	if _, err := fetch(t, Config{Kind: Model, StorageURI: "file://" + src, Dest: dest}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "v1.json"), filepath.Join(src, "v2.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch(t, Config{Kind: Model, StorageURI: "file://" + src, Dest: dest}); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch(t, Config{Kind: Model, StorageURI: "file://" + src + "/gone", Dest: dest}); err == nil {
		t.Fatal("fetching a missing path succeeded")
	}
	if diff := cmp.Diff(map[string]string{"v2.json": "1"}, tree(t, dest)); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"model"}, entries(t, root)); diff != "" {
		t.Errorf("destination's parent (-want +got):\n%s", diff)
	}
}

func TestFnmatch(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*.json", "config.json", true},
		{"*.json", "sub/config.json", true}, // fnmatch's * crosses "/"
		{"*.json", "config.jsonl", false},
		{"data/*", "data/a/b", true},
		{"?.txt", "a.txt", true},
		{"?.txt", "ab.txt", false},
		{"[ab].bin", "b.bin", true},
		{"[!ab].bin", "b.bin", false},
		{"[!ab].bin", "c.bin", true},
		{"a+b(1).txt", "a+b(1).txt", true},
		{"[unclosed", "[unclosed", true},
	}
	for _, tc := range cases {
		if got := matchAny([]string{tc.pattern}, tc.name); got != tc.want {
			t.Errorf("fnmatch(%q, %q) = %v, want %v", tc.name, tc.pattern, got, tc.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	env := map[string]string{
		"STORAGE_URI": "s3://b/p", "IGNORE_PATTERNS": "*.md, tmp/* ,", "ENDPOINT": "http://e", "ACCESS_KEY_ID": "k",
		"SECRET_ACCESS_KEY": "s", "REGION": "eu-west-1", "ACCESS_TOKEN": "t", "HF_ENDPOINT": "http://hub", "UNGZIP": "true", "DESTINATION": "/d",
	}
	got := FromEnv(Dataset, func(k string) string { return env[k] })
	want := Config{Kind: Dataset, StorageURI: "s3://b/p", IgnorePatterns: []string{"*.md", "tmp/*"}, Endpoint: "http://e", AccessKeyID: "k",
		SecretAccessKey: "s", Region: "eu-west-1", AccessToken: "t", HFEndpoint: "http://hub", Ungzip: true, Dest: "/d"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromEnv (-want +got):\n%s", diff)
	}
}
