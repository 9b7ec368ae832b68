package images

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations of the index entry that name an image. containerd's
// importer (`ctr images import`) takes io.containerd.image.name as the whole
// name; the OCI annotation is what skopeo, podman and docker load read.
const (
	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerdRef = "io.containerd.image.name"
)

// newImage is an OCI image (OCI's manifest and config media types) of cfg and
// the layers, in order, each an OCI layer.
func newImage(cfg *v1.ConfigFile, layers ...mutate.Addendum) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	for i := range layers {
		layers[i].MediaType = types.OCILayer
	}
	return mutate.Append(img, layers...)
}

// writeArchive writes img as an OCI image layout in a temporary directory
// beside path, named ref in its index, and packs the layout into a tar at path
// (an oci-archive): sorted entries, each with the time created, owned by root.
// It returns the image's manifest digest and the archive's size.
func writeArchive(img v1.Image, ref, path string, created time.Time) (v1.Hash, int64, error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".layout-")
	if err != nil {
		return v1.Hash{}, 0, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	// The index entry is written here rather than by AppendImage, which adds
	// an artifactType (meant for artifacts, not images) to it.
	if err := lp.WriteImage(img); err != nil {
		return v1.Hash{}, 0, err
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	manifestSize, err := img.Size()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	if err := lp.AppendDescriptor(v1.Descriptor{MediaType: types.OCIManifestSchema1, Size: manifestSize, Digest: digest,
		Annotations: map[string]string{annotationRefName: ref, annotationContainerdRef: ref}}); err != nil {
		return v1.Hash{}, 0, err
	}
	var files []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		return v1.Hash{}, 0, err
	}
	slices.Sort(files)

	tmp := path + ".tmp"
	defer func() { _ = os.Remove(tmp) }()
	size, err := packFiles(tmp, dir, files, created)
	if err != nil {
		return v1.Hash{}, 0, err
	}
	return digest, size, os.Rename(tmp, path)
}

// packFiles writes the files of dir, relative paths in order, into a tar at
// path and returns its size.
func packFiles(path, dir string, files []string, created time.Time) (size int64, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	for _, name := range files {
		if err := addFile(tw, filepath.Join(dir, name), name, created); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return f.Seek(0, io.SeekCurrent)
}

func addFile(tw *tar.Writer, src, name string, created time.Time) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h := &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: st.Size(), ModTime: created}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// ArchivePath is where a build into outDir writes image name's archive
// (`make images`: bin/images/<name>.oci.tar).
func ArchivePath(outDir, name string) string {
	return filepath.Join(outDir, name+".oci.tar")
}

// ArchiveRef is the name the archive at path gives its one image in
// containerd (what `ctr images import` tags it with).
func ArchiveRef(path string) (string, error) {
	idx, err := ReadIndex(path)
	if err != nil {
		return "", err
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[annotationContainerdRef] == "" {
		return "", fmt.Errorf("%s: not one image with a name", path)
	}
	return idx.Manifests[0].Annotations[annotationContainerdRef], nil
}

// ReadIndex reads the index.json of an oci-archive.
func ReadIndex(path string) (*v1.IndexManifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: no index.json", path)
		}
		if err != nil {
			return nil, err
		}
		if h.Name == "index.json" {
			var idx v1.IndexManifest
			if err := json.NewDecoder(tr).Decode(&idx); err != nil {
				return nil, fmt.Errorf("%s: index.json: %w", path, err)
			}
			return &idx, nil
		}
	}
}

// readResults describes the archives of an earlier build with opts, from
// their index.json; an error when one is missing or names another image.
func readResults(opts Options) ([]Result, error) {
	var results []Result
	for _, im := range Images {
		r, err := readResult(ArchivePath(opts.OutDir, im.Name), im.Ref(opts))
		if err != nil {
			return nil, err
		}
		r.Image = im
		results = append(results, r)
	}
	return results, nil
}

// readResult describes the archive at path, which must hold ref alone.
func readResult(path, ref string) (Result, error) {
	r := Result{Ref: ref, Path: path}
	idx, err := ReadIndex(path)
	if err != nil {
		return r, err
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations[annotationContainerdRef] != ref {
		return r, fmt.Errorf("%s does not hold %s alone", path, ref)
	}
	st, err := os.Stat(path)
	if err != nil {
		return r, err
	}
	r.Digest, r.Size = idx.Manifests[0].Digest, st.Size()
	return r, nil
}

// inputStamp hashes everything a build depends on: the options, the go
// command's version, go.mod and go.sum, the non-test Go sources and embedded
// files of apis/, cmd/ and pkg/ (what the Dockerfile copies), and this
// package's own sources (the images' layout and the base files).
func inputStamp(ctx context.Context, opts Options) (string, error) {
	h := sha256.New()
	goVersion, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	fmt.Fprintf(h, "version=%s\ncommit=%s\nldflags=%s\nepoch=%d\narch=%s\ngo=%s\n",
		opts.Version, opts.GitCommit, opts.LDFlags, opts.SourceDateEpoch, opts.GOARCH, strings.TrimSpace(string(goVersion)))
	files := []string{"go.mod", "go.sum"}
	for _, dir := range []string{"apis", "cmd", "pkg"} {
		err := filepath.WalkDir(filepath.Join(opts.RepoRoot, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() && !strings.HasSuffix(p, "_test.go") {
				rel, _ := filepath.Rel(opts.RepoRoot, p)
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	slices.Sort(files)
	for _, name := range files {
		f, err := os.Open(filepath.Join(opts.RepoRoot, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n", name)
		n, err := io.Copy(h, f)
		fmt.Fprintf(h, "\n%d\n", n)
		_ = f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
