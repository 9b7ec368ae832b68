package initializer

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeS3 answers ListObjectsV2 (two keys per page) and GetObject path-style
// for one bucket, fails the first GET of keys in flaky once with a 503, and
// records the Authorization headers it saw.
type fakeS3 struct {
	bucket  string
	objects map[string]string
	flaky   map[string]bool

	mu    sync.Mutex
	auths []string
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auths = append(f.auths, r.Header.Get("Authorization"))
	f.mu.Unlock()
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if bucket != f.bucket {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>")
		return
	}
	if key == "" {
		f.list(w, r)
		return
	}
	f.mu.Lock()
	flaky := f.flaky[key]
	delete(f.flaky, key)
	f.mu.Unlock()
	if flaky {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "<Error><Code>SlowDown</Code><Message>try later</Message></Error>")
		return
	}
	body, ok := f.objects[key]
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>")
		return
	}
	fmt.Fprint(w, body)
}

func (f *fakeS3) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("list-type") != "2" {
		http.Error(w, "want ListObjectsV2", http.StatusBadRequest)
		return
	}
	var keys []string
	for k := range f.objects {
		if strings.HasPrefix(k, q.Get("prefix")) && k > q.Get("continuation-token") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	res := struct {
		XMLName  xml.Name `xml:"ListBucketResult"`
		Contents []struct {
			Key  string
			Size int
		}
		IsTruncated           bool
		NextContinuationToken string `xml:",omitempty"`
	}{}
	if len(keys) > 2 {
		res.IsTruncated, res.NextContinuationToken = true, keys[1]
		keys = keys[:2]
	}
	for _, k := range keys {
		res.Contents = append(res.Contents, struct {
			Key  string
			Size int
		}{k, len(f.objects[k])})
	}
	_ = xml.NewEncoder(w).Encode(res)
}

func TestS3(t *testing.T) {
	objects := map[string]string{
		"data/train/a.bin": "aaaa", "data/train/b.bin": "bb", "data/test/c.bin": "c", "data/README.md": "r",
		"data/dir/": "", "data2/other.bin": "o", "models/m.safetensors": "m", "odd key+(1).txt": "odd",
	}
	cases := map[string]struct {
		uri     string
		ignore  []string
		creds   bool
		flaky   []string
		want    map[string]string
		wantErr string
	}{
		"a prefix, recursively, relative to it; a sibling prefix is not part of it": {
			uri:  "s3://bucket/data",
			want: map[string]string{"train/a.bin": "aaaa", "train/b.bin": "bb", "test/c.bin": "c", "README.md": "r"},
		},
		"ignore patterns on the key": {
			uri: "s3://bucket/data/", ignore: []string{"*.md", "data/test/*"},
			want: map[string]string{"train/a.bin": "aaaa", "train/b.bin": "bb"},
		},
		"one object, signed requests, a 503 retried": {
			uri: "s3://bucket/odd key+(1).txt", creds: true, flaky: []string{"odd key+(1).txt"},
			want: map[string]string{"odd key+(1).txt": "odd"},
		},
		"a missing key": {
			uri:     "s3://bucket/data/nope.bin",
			wantErr: "s3://bucket/data/nope.bin: no such object or prefix at http://",
		},
		"a missing bucket": {
			uri:     "s3://nobucket/data",
			wantErr: `listing s3://nobucket/data: bucket "nobucket" does not exist at http://`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := &fakeS3{bucket: "bucket", objects: objects, flaky: map[string]bool{}}
			for _, k := range tc.flaky {
				f.flaky[k] = true
			}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c := Config{Kind: Dataset, StorageURI: tc.uri, Endpoint: srv.URL, IgnorePatterns: tc.ignore, Dest: filepath.Join(t.TempDir(), "dataset")}
			if tc.creds {
				c.AccessKeyID, c.SecretAccessKey, c.Region = "AKID", "SECRET", "eu-west-1"
			}
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
			for _, a := range f.auths {
				if signed := strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKID/"); signed != tc.creds || (tc.creds && !strings.Contains(a, "/eu-west-1/s3/aws4_request")) {
					t.Errorf("Authorization %q with credentials %v", a, tc.creds)
				}
			}
			if len(tc.flaky) > 0 && !strings.Contains(log, "attempt 1 of 4 failed: fetching s3://bucket/odd key+(1).txt: HTTP 503 SlowDown: try later; retrying") {
				t.Errorf("no retry in the log:\n%s", log)
			}
		})
	}
}
