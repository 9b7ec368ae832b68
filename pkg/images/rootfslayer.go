package images

import (
	"archive/tar"
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"golang.org/x/sys/unix"
)

// layerFormat names the way rootfsLayer writes a layer; a change to it must
// change this, so that cached layers and stamped archives are made again.
const layerFormat = "rootfs-layer-1"

// layer returns the gzipped layer of a rootfs, writing it into the cache
// unless it is there.
func (d debian) layer(r rootfs, created time.Time) (v1.Layer, error) {
	name := fmt.Sprintf("%s-%s-%d.tar.gz", filepath.Base(r.dir), hashOf(layerFormat), created.Unix())
	path := filepath.Join(d.cache, "layers", name)
	if _, err := os.Stat(path); err != nil {
		start := time.Now()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := writeRootfsLayer(path, r, created); err != nil {
			return nil, fmt.Errorf("layer of %s: %w", r.dir, err)
		}
		d.logf("packed %s in %s", path, time.Since(start).Round(time.Second))
	}
	return tarball.LayerFromFile(path, tarball.WithMediaType(types.OCILayer))
}

// writeRootfsLayer writes the tree at r.dir as a gzipped tar at path: entries
// in lexical order, every time the created time, owners by number only, hard
// links as links to their first name. In an overlayfs upper directory a
// character device 0:0 is a deleted file and a directory with the xattr
// trusted.overlay.opaque=y hides the lower one; they become OCI's whiteouts,
// .wh.<name> and .wh..wh..opq.
func writeRootfsLayer(path string, r rootfs, created time.Time) (err error) {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(tmp)
		} else {
			err = os.Rename(tmp, path)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw, err := gzip.NewWriterLevel(bw, gzip.DefaultCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	links := map[[2]uint64]string{} // device and inode -> first name
	err = filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == r.dir {
			return err
		}
		rel := filepath.ToSlash(p[len(r.dir)+1:])
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		h := &tar.Header{Name: rel, Mode: int64(info.Mode().Perm()), Uid: int(st.Uid), Gid: int(st.Gid),
			ModTime: created, Format: tar.FormatPAX}
		if info.Mode()&fs.ModeSetuid != 0 {
			h.Mode |= 0o4000
		}
		if info.Mode()&fs.ModeSetgid != 0 {
			h.Mode |= 0o2000
		}
		if info.Mode()&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, rel+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if r.upper && opaque(p) {
				return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel + "/.wh..wh..opq", ModTime: created, Format: tar.FormatPAX})
			}
			return nil
		case mode&fs.ModeCharDevice != 0 && r.upper && st.Rdev == 0:
			dir, base := filepath.Split(rel)
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dir + ".wh." + base, ModTime: created, Format: tar.FormatPAX})
		case mode&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
			return tw.WriteHeader(h)
		case mode.IsRegular():
			id := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := links[id]; ok && st.Nlink > 1 {
				h.Typeflag, h.Linkname = tar.TypeLink, first
				return tw.WriteHeader(h)
			}
			links[id] = rel
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			return copyFile(tw, p)
		default:
			// Devices, sockets and pipes: a runtime makes its own.
			return nil
		}
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func opaque(dir string) bool {
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(dir, "trusted.overlay.opaque", buf)
	return err == nil && strings.TrimSpace(string(buf[:n])) == "y"
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = io.Copy(w, f)
	return err
}
