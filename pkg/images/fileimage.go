package images

import (
	"path"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// File is one file of a file image.
type File struct {
	Path string // inside the image, e.g. "/hello"
	Data []byte
	Mode int64 // e.g. 0o755
}

// WriteFileImage writes an OCI image archive to dest (what `ctr images import`
// reads) holding ref: one layer with files, under the directories they need,
// and a config with entrypoint and PATH=/ for linux on this machine's
// architecture. The container nodes' pause image and test images are such
// images; every time in them is the Unix epoch, so the same files give the
// same archive.
func WriteFileImage(dest, ref string, entrypoint []string, files ...File) (v1.Hash, error) {
	created := time.Unix(0, 0).UTC()
	var entries []entry
	dirs := map[string]bool{}
	for _, f := range files {
		p := strings.TrimPrefix(path.Clean(f.Path), "/")
		var parents []entry
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			parents = append([]entry{{name: d + "/", mode: 0o755}}, parents...)
		}
		entries = append(append(entries, parents...), entry{name: p, mode: f.Mode, data: f.Data})
	}
	l, err := layer(entries, created)
	if err != nil {
		return v1.Hash{}, err
	}
	img, err := newImage(&v1.ConfigFile{Architecture: runtime.GOARCH, OS: "linux", Created: v1.Time{Time: created},
		Config: v1.Config{Entrypoint: entrypoint, Env: []string{"PATH=/"}}, RootFS: v1.RootFS{Type: "layers"}},
		mutate.Addendum{Layer: l})
	if err != nil {
		return v1.Hash{}, err
	}
	d, _, err := writeArchive(img, ref, dest, created)
	return d, err
}
