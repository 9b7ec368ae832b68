package initializer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeHub serves the Hugging Face hub's file paths for one model and one
// dataset repository: the tree API (one entry per page, linked with Link
// headers as the hub paginates) and resolve/main downloads. It is a protocol
// test: it checks that the initializer asks for what the hub serves, not the
// hub's behaviour itself.
type fakeHub struct {
	token string
	repos map[string]map[string]string // "models/org/name" -> path -> content
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"Invalid credentials in Authorization header"}`)
		return
	}
	p := r.URL.Path
	if rest, ok := strings.CutPrefix(p, "/api/"); ok {
		repo, tail, _ := strings.Cut(rest, "/tree/")
		files, found := h.repos[repo]
		if !found || tail != "main" || r.URL.Query().Get("recursive") != "true" {
			w.WriteHeader(http.StatusUnauthorized) // the hub's answer for a missing repository
			fmt.Fprint(w, `{"error":"Repository Not Found"}`)
			return
		}
		var paths []string
		for k := range files {
			paths = append(paths, k)
		}
		sort.Strings(paths)
		page := 0
		_, _ = fmt.Sscan(r.URL.Query().Get("cursor"), &page)
		if page+1 < len(paths) {
			w.Header().Set("Link", fmt.Sprintf(`<http://%s%s?recursive=true&cursor=%d>; rel="next"`, r.Host, p, page+1))
		}
		entries := []map[string]any{{"type": "directory", "path": "sub"}}
		f := paths[page]
		entries = append(entries, map[string]any{"type": "file", "path": f, "size": len(files[f])})
		_ = json.NewEncoder(w).Encode(entries)
		return
	}
	// /<repo>/resolve/main/<file> for models, /datasets/<repo>/resolve/main/<file> for datasets.
	repoPath, file, ok := strings.Cut(strings.TrimPrefix(p, "/"), "/resolve/main/")
	key := "models/" + repoPath
	if d, isDS := strings.CutPrefix(repoPath, "datasets/"); isDS {
		key = "datasets/" + d
	}
	content, found := h.repos[key][file]
	if !ok || !found {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":"Entry not found"}`)
		return
	}
	fmt.Fprint(w, content)
}

func TestHF(t *testing.T) {
	hub := &fakeHub{repos: map[string]map[string]string{
		"models/meta-llama/Llama-3.2-1B": {"config.json": "{}", "model.safetensors": "weights", "tokenizer.model": "tok",
			"original/params.pth": "pth", "README.md": "readme", "LICENSE.txt": "license"},
		"datasets/tatsu-lab/alpaca": {"data/train.parquet": "rows", "README.md": "readme"},
		"models/org/tiny-GGUF":      {"tiny-Q4_K_M.gguf": "quantized", "README.md": "readme", "config.json": "{}"},
	}}
	cases := map[string]struct {
		kind    Kind
		uri     string
		token   string
		ignore  []string
		want    map[string]string
		wantErr string
	}{
		"model: host and whole path; only the allowed patterns": {
			kind: Model, uri: "hf://meta-llama/Llama-3.2-1B",
			want: map[string]string{"config.json": "{}", "model.safetensors": "weights", "tokenizer.model": "tok", "LICENSE.txt": "license"},
		},
		"model in GGUF files (Kubeflow Trainer v2.4)": {
			kind: Model, uri: "hf://org/tiny-GGUF",
			want: map[string]string{"tiny-Q4_K_M.gguf": "quantized", "config.json": "{}"},
		},
		"model with ignore patterns and a token": {
			kind: Model, uri: "hf://meta-llama/Llama-3.2-1B", token: "secret", ignore: []string{"*.txt"},
			want: map[string]string{"config.json": "{}", "model.safetensors": "weights", "tokenizer.model": "tok"},
		},
		"dataset: host and first path segment, every file": {
			kind: Dataset, uri: "hf://tatsu-lab/alpaca/ignored/part",
			want: map[string]string{"data/train.parquet": "rows", "README.md": "readme"},
		},
		"missing repository": {
			kind: Dataset, uri: "hf://tatsu-lab/nope",
			wantErr: "HTTP 401: Repository Not Found (repository tatsu-lab/nope not found or not accessible; if it is private or gated, set ACCESS_TOKEN",
		},
		"no repository name": {
			kind: Model, uri: "hf://meta-llama", wantErr: "want hf://org/name",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := *hub
			h.token = tc.token
			srv := httptest.NewServer(&h)
			defer srv.Close()
			c := Config{Kind: tc.kind, StorageURI: tc.uri, HFEndpoint: srv.URL, AccessToken: tc.token, IgnorePatterns: tc.ignore,
				Dest: filepath.Join(t.TempDir(), string(tc.kind))}
			log, err := fetch(t, c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v\nlog:\n%s", err, log)
			}
			if diff := cmp.Diff(tc.want, tree(t, c.Dest)); diff != "" {
				t.Errorf("fetched (-want +got):\n%s", diff)
			}
			if !strings.Contains(log, fmt.Sprintf("done: %d files", len(tc.want))) {
				t.Errorf("log lacks the summary:\n%s", log)
			}
		})
	}
}
