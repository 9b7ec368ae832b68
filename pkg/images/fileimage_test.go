package images

import (
	"archive/tar"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriteFileImage reads a file image back as a runtime does: the index
// names it, the config runs its entrypoint on this platform, and its one
// layer holds the file under its directories; the same files give the same
// archive.
func TestWriteFileImage(t *testing.T) {
	dir := t.TempDir()
	files := []File{{Path: "/bin/x", Data: []byte("#!"), Mode: 0o755}, {Path: "/etc/x/y.conf", Data: []byte("y"), Mode: 0o644}}
	first, err := WriteFileImage(filepath.Join(dir, "a.tar"), "registry.trainyard.local/x:1", []string{"/bin/x"}, files...)
	if err != nil {
		t.Fatal(err)
	}
	desc, img := readImage(t, filepath.Join(dir, "a.tar"))
	if desc.Digest != first || desc.Annotations["io.containerd.image.name"] != "registry.trainyard.local/x:1" {
		t.Errorf("index entry %s %v, want %s named registry.trainyard.local/x:1", desc.Digest, desc.Annotations, first)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/bin/x"}, cf.Config.Entrypoint); diff != "" || cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("config for %s/%s, entrypoint (-want +got):\n%s", cf.OS, cf.Architecture, diff)
	}
	got := map[string]string{}
	eachFile(t, img, func(p string, h *tar.Header, r io.Reader) {
		b, _ := io.ReadAll(r)
		got[p] = string(rune(h.Typeflag)) + " " + string(b) + " " + modeString(h.Mode)
	})
	want := map[string]string{"/bin": "5  755", "/bin/x": "0 #! 755", "/etc": "5  755", "/etc/x": "5  755", "/etc/x/y.conf": "0 y 644"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layer (type, data, mode) (-want +got):\n%s", diff)
	}
	second, err := WriteFileImage(filepath.Join(dir, "b.tar"), "registry.trainyard.local/x:1", []string{"/bin/x"}, files...)
	if err != nil {
		t.Fatal(err)
	}
	if fileHash(t, filepath.Join(dir, "a.tar")) != fileHash(t, filepath.Join(dir, "b.tar")) || first != second {
		t.Error("two archives of the same files differ")
	}
}

func modeString(m int64) string { return strconv.FormatInt(m, 8) }
