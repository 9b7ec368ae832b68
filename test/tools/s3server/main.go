// Command s3-server is a real S3-compatible HTTP server for the initializer's
// tests: gofakes3 (github.com/johannesboyne/gofakes3), a Go implementation of
// the S3 REST API (ListBuckets, ListObjects v1/v2, GetObject, PutObject, ...)
// with its in-memory backend. It is small enough to build in seconds, unlike the
// MinIO server; the initializer talks to it over plain HTTP with SigV4-signed
// requests exactly as it would to any S3 endpoint.
//
// Usage: s3-server [-listen ADDR] [-buckets a,b] [-seed bucket=DIR ...]
// [-credentials ACCESS_KEY:SECRET[:SESSION_TOKEN] ...]
// -seed uploads every file under DIR into bucket (created if needed), keyed by
// its path relative to DIR. Without -credentials any request is served, signed
// or not (gofakes3 checks no signature); with them only requests SigV4-signed
// with one of the keys, and its session token when it has one (auth.go). It
// prints "listening on http://ADDR" once it accepts connections.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	buckets := flag.String("buckets", "", "comma-separated buckets to create at start")
	var seeds []string
	flag.Func("seed", "bucket=DIR: upload the files under DIR into bucket (repeatable)", func(s string) error {
		if !strings.Contains(s, "=") {
			return fmt.Errorf("want bucket=DIR, got %q", s)
		}
		seeds = append(seeds, s)
		return nil
	})
	keys := map[string]key{}
	flag.Func("credentials", "ACCESS_KEY:SECRET[:SESSION_TOKEN]: accept only requests signed with such a key (repeatable)", func(s string) error {
		id, k, err := parseCredentials(s)
		keys[id] = k
		return err
	})
	flag.Parse()
	backend := s3mem.New()
	created := map[string]bool{}
	create := func(b string) {
		if created[b] {
			return
		}
		if err := backend.CreateBucket(b); err != nil {
			log.Fatalf("creating bucket %s: %v", b, err)
		}
		created[b] = true
	}
	for _, b := range strings.Split(*buckets, ",") {
		if b != "" {
			create(b)
		}
	}
	for _, s := range seeds {
		bucket, dir, _ := strings.Cut(s, "=")
		create(bucket)
		if err := seed(backend, bucket, dir); err != nil {
			log.Fatalf("seeding %s from %s: %v", bucket, dir, err)
		}
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(false))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	fmt.Printf("listening on http://%s\n", ln.Addr())
	_ = os.Stdout.Sync()
	var h http.Handler = faker.Server()
	if len(keys) > 0 {
		h = &sigV4Auth{keys: keys, next: h}
	}
	log.Fatal(http.Serve(ln, h))
}

func seed(backend *s3mem.Backend, bucket, dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		_, err = backend.PutObject(bucket, filepath.ToSlash(rel), map[string]string{}, f, st.Size(), nil)
		return err
	})
}
