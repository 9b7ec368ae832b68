// Package initializer is Trainyard's dataset and model initializer: it fetches
// what a TrainJob's spec.initializer names (STORAGE_URI) into the shared
// volume before the trainer starts. It follows Kubeflow Trainer's env contract
// (STORAGE_URI, ACCESS_TOKEN, IGNORE_PATTERNS; for s3 also ENDPOINT,
// ACCESS_KEY_ID, SECRET_ACCESS_KEY, REGION; Trainyard adds AWS_SESSION_TOKEN and
// a web identity, see credentials.go) and writes to /workspace/dataset or
// /workspace/model. Schemes: hf:// (the Hugging Face hub's HTTP API), s3:// (any
// S3-compatible endpoint) and, a Trainyard addition, file:// (data already on
// the node).
//
// Nothing half-written is left behind: files are fetched into a staging
// directory beside the destination, which replaces the destination only once
// everything has arrived.
package initializer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Kind says what is fetched: a dataset or a model.
type Kind string

// The kinds.
const (
	Dataset Kind = "dataset"
	Model   Kind = "model"
)

// Default destinations (the shared volume is mounted at /workspace).
const (
	DefaultDatasetDir = "/workspace/dataset"
	DefaultModelDir   = "/workspace/model"
)

// DefaultHFEndpoint is the Hugging Face hub.
const DefaultHFEndpoint = "https://huggingface.co"

// modelAllowPatterns are the files of a hf:// model that are fetched; GGUF
// files (llama.cpp's format) too since Kubeflow Trainer v2.4.
var modelAllowPatterns = []string{"*.json", "*.safetensors", "*.model", "*.txt", "*.gguf"}

// Config is one run of the initializer.
type Config struct {
	Kind Kind
	// StorageURI is what to fetch (STORAGE_URI).
	StorageURI string
	// Dest is the directory the files end up in (DESTINATION; default
	// DefaultDatasetDir or DefaultModelDir).
	Dest string
	// IgnorePatterns are fnmatch patterns of keys or relative paths to skip
	// (IGNORE_PATTERNS, comma-separated).
	IgnorePatterns []string
	// Ungzip decompresses every fetched *.gz file (dropping the suffix) before
	// the files are moved into place (UNGZIP=true; a Trainyard addition).
	Ungzip bool

	// AccessToken authenticates hf:// (ACCESS_TOKEN).
	AccessToken string
	// HFEndpoint is the hub (HF_ENDPOINT, as huggingface_hub reads it; default DefaultHFEndpoint).
	HFEndpoint string

	// S3: ENDPOINT (default https://s3.<region>.amazonaws.com), ACCESS_KEY_ID,
	// SECRET_ACCESS_KEY (anonymous requests when empty, unless a web identity
	// is given), REGION (default auto).
	Endpoint, AccessKeyID, SecretAccessKey, Region string
	// SessionToken goes with a temporary AccessKeyID (AWS_SESSION_TOKEN): it
	// is sent, signed, as X-Amz-Security-Token.
	SessionToken string
	// A web identity, used when no AccessKeyID is given: the token in
	// WebIdentityTokenFile (AWS_WEB_IDENTITY_TOKEN_FILE) is exchanged at
	// STSEndpoint (AWS_STS_ENDPOINT or AWS_ENDPOINT_URL_STS; default
	// https://sts.<region>.amazonaws.com, https://sts.amazonaws.com for
	// us-east-1 and auto) through AssumeRoleWithWebIdentity for temporary
	// credentials of RoleARN (AWS_ROLE_ARN), session RoleSessionName
	// (AWS_ROLE_SESSION_NAME, default DefaultRoleSessionName), and again
	// before they expire.
	WebIdentityTokenFile, RoleARN, RoleSessionName, STSEndpoint string

	// Attempts per request and the first back-off (doubled each time); defaults 4 and 1s.
	Attempts  int
	RetryBase time.Duration
	// ProgressEvery is the interval of the progress lines (default 5s).
	ProgressEvery time.Duration
	// HTTP is the client for hf://, s3:// and STS (default: one with a 30s
	// dial, TLS handshake and header timeout, DialTimeout). Whatever the
	// client, credentials reach only the host they are for: a redirect to
	// another origin (scheme, host, port) loses them (scopedClient).
	HTTP *http.Client
	// Log receives the log lines (default: stdout).
	Log io.Writer
}

// FromEnv reads the env contract.
func FromEnv(kind Kind, getenv func(string) string) Config {
	c := Config{
		Kind:            kind,
		StorageURI:      getenv("STORAGE_URI"),
		Dest:            getenv("DESTINATION"),
		AccessToken:     getenv("ACCESS_TOKEN"),
		HFEndpoint:      getenv("HF_ENDPOINT"),
		Endpoint:        getenv("ENDPOINT"),
		AccessKeyID:     getenv("ACCESS_KEY_ID"),
		SecretAccessKey: getenv("SECRET_ACCESS_KEY"),
		Region:          getenv("REGION"),
		SessionToken:    getenv("AWS_SESSION_TOKEN"),

		WebIdentityTokenFile: getenv("AWS_WEB_IDENTITY_TOKEN_FILE"),
		RoleARN:              getenv("AWS_ROLE_ARN"),
		RoleSessionName:      getenv("AWS_ROLE_SESSION_NAME"),
		STSEndpoint:          getenv("AWS_STS_ENDPOINT"),
		Ungzip:               strings.EqualFold(getenv("UNGZIP"), "true") || getenv("UNGZIP") == "1",
	}
	if c.STSEndpoint == "" {
		c.STSEndpoint = getenv("AWS_ENDPOINT_URL_STS") // the AWS SDKs' name
	}
	for _, p := range strings.Split(getenv("IGNORE_PATTERNS"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.IgnorePatterns = append(c.IgnorePatterns, p)
		}
	}
	return c
}

func (c *Config) defaults() error {
	switch c.Kind {
	case Dataset:
		if c.Dest == "" {
			c.Dest = DefaultDatasetDir
		}
	case Model:
		if c.Dest == "" {
			c.Dest = DefaultModelDir
		}
	default:
		return fmt.Errorf("unknown initializer kind %q (want dataset or model)", c.Kind)
	}
	if c.HFEndpoint == "" {
		c.HFEndpoint = DefaultHFEndpoint
	}
	if c.Region == "" {
		c.Region = "auto"
	}
	if c.Attempts <= 0 {
		c.Attempts = 4
	}
	if c.RetryBase <= 0 {
		c.RetryBase = time.Second
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 5 * time.Second
	}
	if c.HTTP == nil {
		tr, _ := newTransport()
		c.HTTP = &http.Client{Transport: tr}
	}
	c.HTTP = scopedClient(c.HTTP)
	if c.Log == nil {
		c.Log = os.Stdout
	}
	return nil
}

// object is one file to fetch: where it goes (relative to the destination),
// its size when known (-1 otherwise) and what the source needs to open it.
type object struct {
	rel  string
	size int64
	ref  string
}

// source lists and opens the objects of one storage URI.
type source interface {
	// describe names the source in log lines and errors.
	describe() string
	list(ctx context.Context) ([]object, error)
	open(ctx context.Context, o object) (io.ReadCloser, error)
}

// permanentError is a failure that retrying cannot fix (a missing object, a
// denied request).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(err error) error { return &permanentError{err} }

func newSource(c *Config) (source, error) {
	u, err := url.Parse(c.StorageURI)
	if err != nil {
		return nil, fmt.Errorf("STORAGE_URI %q: %w", c.StorageURI, err)
	}
	switch u.Scheme {
	case "file":
		return newFileSource(u)
	case "s3":
		return newS3Source(c, u)
	case "hf":
		return newHFSource(c, u)
	case "":
		if c.StorageURI == "" {
			return nil, errors.New("STORAGE_URI is not set (spec.initializer." + string(c.Kind) + ".storageUri)")
		}
	}
	return nil, fmt.Errorf("STORAGE_URI %q: unsupported scheme %q (supported: hf, s3, file)", c.StorageURI, u.Scheme)
}

// Run fetches c.StorageURI into c.Dest.
func Run(ctx context.Context, c Config) error {
	if err := c.defaults(); err != nil {
		return err
	}
	src, err := newSource(&c)
	if err != nil {
		return err
	}
	r := &run{c: &c, src: src}
	return r.fetch(ctx)
}

type run struct {
	c   *Config
	src source
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.c.Log, format+"\n", args...)
}

func (r *run) fetch(ctx context.Context) error {
	start := time.Now()
	r.logf("fetching %s %s into %s", r.c.Kind, r.src.describe(), r.c.Dest)
	var objs []object
	err := retry(ctx, r.c.Attempts, r.c.RetryBase, r.logf, "listing "+r.src.describe(), func() error {
		var err error
		objs, err = r.src.list(ctx)
		return err
	})
	if err != nil {
		return err
	}
	objs = r.filter(objs)
	if len(objs) == 0 {
		return fmt.Errorf("%s: nothing to fetch (every file matched IGNORE_PATTERNS %v)", r.src.describe(), r.c.IgnorePatterns)
	}
	var total int64
	for _, o := range objs {
		total += max(o.size, 0)
	}
	r.logf("%d files, %s", len(objs), humanBytes(total))

	parent := filepath.Dir(filepath.Clean(r.c.Dest))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", parent, err)
	}
	// Stage beside the destination, so that one rename puts everything in
	// place; inside it when it is a mount point (another file system).
	stageIn := parent
	if isMountPoint(r.c.Dest) {
		stageIn = r.c.Dest
	}
	staging, err := os.MkdirTemp(stageIn, "."+filepath.Base(r.c.Dest)+".partial-")
	if err != nil {
		return fmt.Errorf("creating the staging directory: %w", err)
	}
	if err := os.Chmod(staging, 0o755); err != nil { // MkdirTemp's 0700 would hide it from other users
		_ = os.RemoveAll(staging)
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = os.RemoveAll(staging)
		}
	}()

	prog := newProgress(r.c.Log, total, r.c.ProgressEvery)
	defer prog.stop()
	for i, o := range objs {
		fileStart := time.Now()
		n, err := r.fetchOne(ctx, staging, o, prog)
		if err != nil {
			return err
		}
		r.logf("[%d/%d] %s: %s in %.1fs", i+1, len(objs), o.rel, humanBytes(n), time.Since(fileStart).Seconds())
	}
	prog.stop()
	if r.c.Ungzip {
		if err := ungzipTree(staging, r.logf); err != nil {
			return err
		}
	}
	if err := replaceDir(staging, r.c.Dest); err != nil {
		return err
	}
	done = true
	secs := time.Since(start).Seconds()
	r.logf("done: %d files, %s in %.1fs (%.1f MB/s) into %s", len(objs), humanBytes(prog.bytes()), secs, float64(prog.bytes())/1e6/max(secs, 1e-3), r.c.Dest)
	return nil
}

// filter drops ignored objects and, for hf:// models, files outside the allow patterns.
func (r *run) filter(objs []object) []object {
	var out []object
	for _, o := range objs {
		if _, isHF := r.src.(*hfSource); isHF && r.c.Kind == Model && !matchAny(modelAllowPatterns, o.rel) {
			continue
		}
		if matchAny(r.c.IgnorePatterns, o.rel) || (o.ref != o.rel && matchAny(r.c.IgnorePatterns, o.ref)) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// fetchOne copies one object into the staging directory, retrying transient
// failures from the start of the file.
func (r *run) fetchOne(ctx context.Context, staging string, o object, prog *progress) (int64, error) {
	dst := filepath.Join(staging, filepath.FromSlash(o.rel))
	if !strings.HasPrefix(dst, staging+string(filepath.Separator)) {
		return 0, fmt.Errorf("%s: refusing path %q outside the destination", r.src.describe(), o.rel)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	var n int64
	err := retry(ctx, r.c.Attempts, r.c.RetryBase, r.logf, "fetching "+o.rel, func() error {
		prog.add(-n)
		n = 0
		rc, err := r.src.open(ctx, o)
		if err != nil {
			return err
		}
		defer func() { _ = rc.Close() }()
		f, err := os.Create(dst)
		if err != nil {
			return permanent(err)
		}
		n, err = io.Copy(f, prog.reader(rc))
		if cerr := f.Close(); err == nil && cerr != nil {
			err = permanent(cerr)
		}
		if err == nil && o.size >= 0 && n != o.size {
			err = fmt.Errorf("%s: got %d bytes, want %d", o.rel, n, o.size)
		}
		return err
	})
	return n, err
}
