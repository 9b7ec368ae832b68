// Package images builds Trainyard's container images without a container
// engine: the manager's and the initializer's, as OCI image archives
// (`ctr images import`, `docker load` and `skopeo copy oci-archive:` read them),
// with github.com/google/go-containerregistry. They are what the Dockerfile's
// final stages make: static binaries built as its builder stage builds them, on
// a base that stands in for gcr.io/distroless/static:nonroot (the nonroot user
// 65532, CA certificates, /tmp, /home/nonroot), with the same WORKDIR, USER,
// ENTRYPOINT, EXPOSE and LABEL; the tests in this package parse the Dockerfile
// and hold the two together.
//
// The archives are reproducible: every time in them is SourceDateEpoch, files
// are owned by root unless the base says otherwise, entries are sorted, and the
// binaries are built with -trimpath and without VCS stamping, so the same tree,
// options and Go toolchain give the same bytes. Build skips the work when a
// stamp of its inputs (the sources the binaries are built from, go.mod, go.sum,
// this package and the options) matches the one of the last build in OutDir.
package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Image is what one image holds: the binaries copied to /<name>, in order,
// each in a layer of its own (as each COPY of the Dockerfile makes one), over
// the base layer.
type Image struct {
	Name       string
	Binaries   []string
	Entrypoint []string
	// ExposedPorts as the image config writes them ("9443/tcp").
	ExposedPorts []string
	// Stage is the Dockerfile stage this image is built as: its name, or ""
	// for the last (default) stage.
	Stage string
}

// The fixed parts of every image: the Dockerfile's WORKDIR and USER, and the
// environment of the distroless base.
const (
	User    = "65532:65532"
	WorkDir = "/"
	// CABundle is where the CA certificates are, as on Debian and distroless.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
	// Registry is the host part of the local tags: no registry answers to it,
	// so a runtime that has the image imported never tries to pull it.
	Registry = "trainyard.local"
	// Source is the org.opencontainers.image.source label.
	Source = "https://github.com/trainyard/trainyard"
)

// Env is the environment of gcr.io/distroless/static:nonroot, which the
// Dockerfile's final stages inherit (they set none of their own).
var Env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=" + CABundle,
}

// Images are the images Build makes, in the order of the Dockerfile's stages.
var Images = []Image{
	{
		Name:       "trainyard-initializer",
		Binaries:   []string{"trainyard-initializer"},
		Entrypoint: []string{"/trainyard-initializer"},
		Stage:      "initializer",
	},
	{
		// The manager's image also carries the initializer: a runtime's
		// initializer container may run it with command [/trainyard-initializer, dataset].
		Name:         "trainyard-manager",
		Binaries:     []string{"trainyard-manager", "trainyard-initializer"},
		Entrypoint:   []string{"/trainyard-manager"},
		ExposedPorts: []string{"8081/tcp", "8443/tcp", "9443/tcp", "10443/tcp"},
	},
}

// Labels are the labels of an image built with opts.
func (im Image) Labels(opts Options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    im.Name,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.version":  opts.Version,
		"org.opencontainers.image.revision": opts.GitCommit,
	}
}

// Ref is the image's local name: trainyard.local/<name>:<version>.
func (im Image) Ref(opts Options) string {
	return Registry + "/" + im.Name + ":" + Tag(opts.Version)
}

// Options of a build. RepoRoot, OutDir and Version are required.
type Options struct {
	// RepoRoot is the root of the Trainyard module.
	RepoRoot string
	// OutDir gets <name>.oci.tar per image and the stamp of the build.
	OutDir string
	// Version and GitCommit label the images; Version is also their tag.
	Version, GitCommit string
	// LDFlags are the linker flags that stamp pkg/version (the Makefile's
	// LDFLAGS); "-s -w" is prepended, as the Dockerfile does.
	LDFlags string
	// SourceDateEpoch is the time of every file, layer and config (seconds).
	SourceDateEpoch int64
	// GOARCH of the images; runtime.GOARCH when empty. GOOS is linux.
	GOARCH string
	// CacheDir keeps the training images' rootfs, downloads and layers
	// between builds (BuildTraining); OutDir/cache when empty.
	CacheDir string
	// Log gets a line per step; nil discards them.
	Log io.Writer
}

// Result is one image that Build wrote (or found up to date).
type Result struct {
	Image
	Ref    string
	Path   string // the archive
	Digest v1.Hash
	Size   int64 // of the archive
}

// Tag turns a version (git describe's output) into a valid tag.
func Tag(version string) string {
	t := regexp.MustCompile(`[^A-Za-z0-9_.-]`).ReplaceAllString(version, "-")
	if t == "" || strings.HasPrefix(t, ".") || strings.HasPrefix(t, "-") {
		t = "v" + t
	}
	return t[:min(len(t), 128)]
}

// Build writes an OCI image archive per image of Images into opts.OutDir,
// unless the stamp there says they were built from the same inputs. The
// second return is true when nothing was rebuilt.
func Build(ctx context.Context, opts Options) ([]Result, bool, error) {
	if opts.RepoRoot == "" || opts.OutDir == "" || opts.Version == "" {
		return nil, false, errors.New("images: RepoRoot, OutDir and Version are required")
	}
	if opts.GOARCH == "" {
		opts.GOARCH = runtime.GOARCH
	}
	logf := func(format string, a ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", a...)
		}
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, false, err
	}
	stamp, err := inputStamp(ctx, opts)
	if err != nil {
		return nil, false, err
	}
	stampFile := filepath.Join(opts.OutDir, ".images.stamp")
	if b, err := os.ReadFile(stampFile); err == nil && string(b) == stamp {
		if results, err := readResults(opts); err == nil {
			return results, true, nil
		}
	}
	_ = os.Remove(stampFile)

	work, err := os.MkdirTemp(opts.OutDir, ".build-")
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = os.RemoveAll(work) }()

	start := time.Now()
	bins, err := buildBinaries(ctx, opts, filepath.Join(work, "bin"))
	if err != nil {
		return nil, false, err
	}
	logf("built %s for linux/%s in %s", strings.Join(binaryNames(), ", "), opts.GOARCH, time.Since(start).Round(100*time.Millisecond))

	created := time.Unix(opts.SourceDateEpoch, 0).UTC()
	base, err := baseLayer(created)
	if err != nil {
		return nil, false, err
	}
	layers := map[string]v1.Layer{}
	for name, path := range bins {
		if layers[name], err = binaryLayer(name, path, created); err != nil {
			return nil, false, err
		}
	}
	var results []Result
	for _, im := range Images {
		start := time.Now()
		img, err := assemble(im, opts, created, base, layers)
		if err != nil {
			return nil, false, fmt.Errorf("image %s: %w", im.Name, err)
		}
		r := Result{Image: im, Ref: im.Ref(opts), Path: ArchivePath(opts.OutDir, im.Name)}
		if r.Digest, r.Size, err = writeArchive(img, r.Ref, r.Path, created); err != nil {
			return nil, false, fmt.Errorf("image %s: %w", im.Name, err)
		}
		logf("wrote %s (%s, %s) in %s", r.Path, r.Ref, mib(r.Size), time.Since(start).Round(100*time.Millisecond))
		results = append(results, r)
	}
	return results, false, os.WriteFile(stampFile, []byte(stamp), 0o644)
}

// binaryNames are the binaries the images need, each once.
func binaryNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, im := range Images {
		for _, b := range im.Binaries {
			if !seen[b] {
				seen[b] = true
				names = append(names, b)
			}
		}
	}
	return names
}

// buildBinaries builds every binary of the images with one go build, as the
// Dockerfile's builder stage does: static (CGO_ENABLED=0), -trimpath, "-s -w"
// and the version flags; -buildvcs=false since the Dockerfile's context has no
// .git either.
func buildBinaries(ctx context.Context, opts Options, dir string) (map[string]string, error) {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", strings.TrimSpace("-s -w " + opts.LDFlags), "-o", dir + "/"}
	for _, name := range binaryNames() {
		args = append(args, "./cmd/"+name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = opts.RepoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+opts.GOARCH, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	bins := map[string]string{}
	for _, name := range binaryNames() {
		bins[name] = filepath.Join(dir, name)
	}
	return bins, nil
}

// assemble stacks the base layer and the image's binaries, and writes the
// config as the Dockerfile's stage would.
func assemble(im Image, opts Options, created time.Time, base v1.Layer, bins map[string]v1.Layer) (v1.Image, error) {
	ports := map[string]struct{}{}
	for _, p := range im.ExposedPorts {
		ports[p] = struct{}{}
	}
	cfg := &v1.ConfigFile{
		Architecture: opts.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:         User,
			WorkingDir:   WorkDir,
			Entrypoint:   im.Entrypoint,
			Env:          Env,
			Labels:       im.Labels(opts),
			ExposedPorts: ports,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	if len(ports) == 0 {
		cfg.Config.ExposedPorts = nil
	}
	history := func(by string) v1.History { return v1.History{Created: v1.Time{Time: created}, CreatedBy: by} }
	adds := []mutate.Addendum{{Layer: base,
		History: history("trainyard base: nonroot user 65532, CA certificates (stands in for gcr.io/distroless/static:nonroot)")}}
	for _, b := range im.Binaries {
		adds = append(adds, mutate.Addendum{Layer: bins[b],
			History: history(fmt.Sprintf("COPY /out/%s /%s", b, b))})
	}
	return newImage(cfg, adds...)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
