package initializer

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// fileSource copies a file or a directory tree already on the node
// (file:///path; a Trainyard addition for data that ships with the machine,
// such as Debian's dataset packages).
type fileSource struct {
	path string
}

func newFileSource(u *url.URL) (*fileSource, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("file URI %q: want file:///absolute/path (host %q)", u.String(), u.Host)
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return nil, fmt.Errorf("file URI %q: want file:///absolute/path", u.String())
	}
	return &fileSource{path: filepath.Clean(u.Path)}, nil
}

func (s *fileSource) describe() string { return "file://" + s.path }

func (s *fileSource) list(context.Context) ([]object, error) {
	st, err := os.Stat(s.path)
	if err != nil {
		return nil, permanent(fmt.Errorf("%s: %w", s.describe(), err))
	}
	if !st.IsDir() {
		return []object{{rel: filepath.Base(s.path), size: st.Size(), ref: s.path}}, nil
	}
	var objs []object
	err = filepath.WalkDir(s.path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		st, err := os.Stat(p) // follows symlinks: their target's content is copied
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.path, p)
		if err != nil {
			return err
		}
		objs = append(objs, object{rel: filepath.ToSlash(rel), size: st.Size(), ref: p})
		return nil
	})
	if err != nil {
		return nil, permanent(fmt.Errorf("%s: %w", s.describe(), err))
	}
	if len(objs) == 0 {
		return nil, permanent(fmt.Errorf("%s: no files in the directory", s.describe()))
	}
	return objs, nil
}

func (s *fileSource) open(_ context.Context, o object) (io.ReadCloser, error) {
	f, err := os.Open(o.ref)
	if err != nil {
		return nil, permanent(err)
	}
	return f, nil
}
