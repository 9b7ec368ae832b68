package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

const repoRoot = "../.."

// The identity the test builds with, as the Makefile passes it.
const (
	testVersion = "v9.9.9-test-dirty"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	testDate    = "2026-01-02T03:04:05Z"
	testEpoch   = 1767323045 // testDate
)

func testOptions(t *testing.T, out string) Options {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	pkg := "github.com/trainyard/trainyard/pkg/version"
	return Options{RepoRoot: root, OutDir: out, Version: testVersion, GitCommit: testCommit, SourceDateEpoch: testEpoch,
		LDFlags: "-X " + pkg + ".Version=" + testVersion + " -X " + pkg + ".GitCommit=" + testCommit + " -X " + pkg + ".BuildDate=" + testDate}
}

// TestImages builds the images into a temporary directory through Build, reads
// them back with go-containerregistry, and checks each against the
// Dockerfile's stage it stands for; then that a second build is skipped, that
// a build elsewhere gives the same bytes, and that a changed input rebuilds.
func TestImages(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("building the images needs the go command: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	opts := testOptions(t, t.TempDir())
	results, upToDate, err := Build(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if upToDate {
		t.Error("the first build into an empty directory said it was up to date")
	}
	stages := parseDockerfile(t)
	if len(results) != len(stages) {
		t.Errorf("%d images built, the Dockerfile has %d final stages", len(results), len(stages))
	}
	for _, r := range results {
		t.Run(r.Name, func(t *testing.T) {
			i := slices.IndexFunc(stages, func(s *stage) bool { return s.name == r.Stage })
			if r.Stage == "" {
				i = len(stages) - 1 // the default target
			}
			if i < 0 || (r.Stage == "" && stages[i].name != "") {
				t.Fatalf("the Dockerfile has no stage %q for %s", r.Stage, r.Name)
			}
			checkImage(t, r, opts, stages[i])
		})
	}

	t.Run("Exposed ports are the manager's container ports", func(t *testing.T) {
		var d appsv1.Deployment
		b, err := os.ReadFile(filepath.Join(repoRoot, "manifests/base/manager/manager.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		var ports []string
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			ports = append(ports, strconv.Itoa(int(p.ContainerPort))+"/"+strings.ToLower(string(p.Protocol)))
		}
		slices.Sort(ports)
		manager := stages[len(stages)-1]
		if diff := cmp.Diff(ports, sorted(manager.expose)); diff != "" {
			t.Errorf("the Dockerfile's EXPOSE (+) and the Deployment's container ports (-) differ:\n%s", diff)
		}
	})

	t.Run("A second build is skipped", func(t *testing.T) {
		again, upToDate, err := Build(ctx, opts)
		checkSkipped(t, results, again, upToDate, err)
	})

	t.Run("Reproducible, and rebuilt when an input changes", func(t *testing.T) {
		other := testOptions(t, t.TempDir())
		again, _, err := Build(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range again {
			if a, b := fileHash(t, results[i].Path), fileHash(t, r.Path); a != b {
				t.Errorf("%s: two builds of the same inputs differ: sha256 %x and %x", r.Name, a, b)
			}
		}
		other.Version = "v9.9.10-test"
		changed, upToDate, err := Build(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		if upToDate {
			t.Fatal("a build with another version said it was up to date")
		}
		for i, r := range changed {
			if r.Digest == results[i].Digest {
				t.Errorf("%s: another version gave the same image %s", r.Name, r.Digest)
			}
			if want := "trainyard.local/" + r.Name + ":v9.9.10-test"; r.Ref != want {
				t.Errorf("%s: ref %s, want %s", r.Name, r.Ref, want)
			}
			if a, b := layerDigests(t, results[i].Path), layerDigests(t, r.Path); a[0] != b[0] {
				t.Errorf("%s: the base layer changed with the version: %s and %s", r.Name, a[0], b[0])
			}
		}
	})
}

// checkSkipped checks what a second build with the same inputs returned:
// nothing rebuilt, and the same images as the first.
func checkSkipped(t *testing.T, first, again []Result, upToDate bool, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if !upToDate {
		t.Error("a second build with the same inputs rebuilt images")
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("the up-to-date build describes other images (-first +second):\n%s", diff)
	}
}

// readImage opens an oci-archive the way a runtime does: it unpacks the
// layout and reads the one image its index names.
func readImage(t *testing.T, archive string) (v1.Descriptor, v1.Image) {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "..") {
			t.Fatalf("%s: unexpected entry %s (type %c)", archive, h.Name, h.Typeflag)
		}
		p := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("%s: index has %d manifests, want 1", archive, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return m.Manifests[0], img
}

// eachFile calls fn with each entry of the image's flattened file system
// (whiteouts applied): its path from /, its header and its data.
func eachFile(t *testing.T, img v1.Image, fn func(p string, h *tar.Header, r io.Reader)) {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn("/"+strings.TrimSuffix(h.Name, "/"), h, tr)
	}
}

func layerDigests(t *testing.T, archive string) []v1.Hash {
	_, img := readImage(t, archive)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var ds []v1.Hash
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}

// checkImage compares one image with its Dockerfile stage and with what its
// binaries need.
func checkImage(t *testing.T, r Result, opts Options, st *stage) {
	desc, img := readImage(t, r.Path)
	ref := "trainyard.local/" + r.Name + ":" + testVersion
	if desc.Digest != r.Digest || desc.MediaType != types.OCIManifestSchema1 || desc.ArtifactType != "" {
		t.Errorf("index names %s (%s, artifactType %q), want %s (%s), an image rather than an artifact",
			desc.Digest, desc.MediaType, desc.ArtifactType, r.Digest, types.OCIManifestSchema1)
	}
	for _, a := range []string{"org.opencontainers.image.ref.name", "io.containerd.image.name"} {
		if got := desc.Annotations[a]; got != ref {
			t.Errorf("annotation %s = %q, want %q", a, got, ref)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != st.user || c.User != "65532:65532" {
		t.Errorf("User %q; the Dockerfile says %q (nonroot is 65532:65532)", c.User, st.user)
	}
	if c.WorkingDir != st.workdir {
		t.Errorf("WorkingDir %q; the Dockerfile says %q", c.WorkingDir, st.workdir)
	}
	if diff := cmp.Diff(st.entrypoint, c.Entrypoint); diff != "" {
		t.Errorf("Entrypoint (-Dockerfile +image):\n%s", diff)
	}
	if c.Cmd != nil {
		t.Errorf("Cmd %q, the Dockerfile sets none", c.Cmd)
	}
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, p)
	}
	if diff := cmp.Diff(sorted(st.expose), sorted(ports)); diff != "" {
		t.Errorf("ExposedPorts (-Dockerfile +image):\n%s", diff)
	}
	// distroless's environment, and whatever ENV the stage adds.
	if diff := cmp.Diff(append(slices.Clone(Env), st.env...), c.Env); diff != "" {
		t.Errorf("Env (-distroless and the Dockerfile +image):\n%s", diff)
	}
	labels := map[string]string{}
	for k, v := range st.labels {
		labels[k] = st.expand(v, map[string]string{"VERSION": opts.Version, "GIT_COMMIT": opts.GitCommit})
	}
	if diff := cmp.Diff(labels, c.Labels); diff != "" {
		t.Errorf("Labels (-Dockerfile with the build's VERSION and GIT_COMMIT +image):\n%s", diff)
	}
	if want := time.Unix(testEpoch, 0).UTC(); !cf.Created.Equal(want) || cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("created %s on %s/%s, want %s on linux/%s", cf.Created.Time, cf.OS, cf.Architecture, want, runtime.GOARCH)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", mt)
	}
	checkFiles(t, img, st, r.Name)
}

// checkFiles reads the image's flattened file system: the binaries the stage
// copies, and the base's users, CA certificates and directories.
func checkFiles(t *testing.T, img v1.Image, st *stage, name string) {
	files := map[string]*tar.Header{}
	data := map[string][]byte{}
	eachFile(t, img, func(p string, h *tar.Header, r io.Reader) {
		files[p] = h
		var err error
		if data[p], err = io.ReadAll(r); err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(time.Unix(testEpoch, 0)) {
			t.Errorf("%s: time %s, want SOURCE_DATE_EPOCH %d", p, h.ModTime, testEpoch)
		}
	})
	var top []string
	for p, h := range files {
		if h.Typeflag == tar.TypeReg && strings.Count(p, "/") == 1 {
			top = append(top, p)
		}
	}
	var copied []string
	for dest := range st.copies {
		copied = append(copied, dest)
	}
	if diff := cmp.Diff(sorted(copied), sorted(top)); diff != "" {
		t.Errorf("files in / (-the Dockerfile's COPY +image):\n%s", diff)
	}
	for dest, src := range st.copies {
		h := files[dest]
		if h == nil {
			continue
		}
		if h.Mode&0o111 != 0o111 || h.Uid != 0 || h.Gid != 0 || filepath.Base(src) != filepath.Base(dest) {
			t.Errorf("%s: mode %o owner %d:%d, from %s; want executable, root's, the builder's %s", dest, h.Mode, h.Uid, h.Gid, src, filepath.Base(dest))
		}
		// Static and stamped: it runs here (the image is for this machine's
		// architecture) and prints the version the build passed.
		bin := filepath.Join(t.TempDir(), filepath.Base(dest))
		if err := os.WriteFile(bin, data[dest], 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "--version").CombinedOutput()
		want := testVersion + " (commit " + testCommit + ", built " + testDate + ", "
		if err != nil || !strings.HasPrefix(string(out), want) {
			t.Errorf("%s --version: %v, printed %q, want it to start %q", dest, err, out, want)
		}
	}
	if st.entrypoint[0] != "/"+name || files[st.entrypoint[0]] == nil {
		t.Errorf("entrypoint %s is not the image's binary /%s", st.entrypoint[0], name)
	}

	var certs int
	rest := data[CABundle]
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil || !c.IsCA {
			t.Errorf("%s: certificate %d: %v (CA: %v)", CABundle, certs, err, err == nil && c.IsCA)
		}
		certs++
	}
	if certs < 100 || len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("%s holds %d certificates and %d bytes of something else; want the NSS roots (over 100)", CABundle, certs, len(rest))
	}
	if !strings.Contains(string(data["/etc/passwd"]), "nonroot:x:65532:65532:nonroot:/home/nonroot:") ||
		!strings.Contains(string(data["/etc/group"]), "nonroot:x:65532:") {
		t.Errorf("/etc/passwd or /etc/group lacks nonroot 65532:\n%s%s", data["/etc/passwd"], data["/etc/group"])
	}
	if h := files["/home/nonroot"]; h == nil || h.Typeflag != tar.TypeDir || h.Uid != 65532 || h.Gid != 65532 {
		t.Errorf("/home/nonroot is not a directory owned by 65532: %+v", h)
	}
	if h := files["/tmp"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp is not a sticky world-writable directory: %+v", h)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func fileHash(t *testing.T, path string) [32]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
