package processnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// A pod may write anything into its volumes, symlinks included, and name any
// path below a volume as a subPath; a hostPath names a path below an allowed
// root, which may hold symlinks too. What a pod mounts must never lie outside
// the volume (or root) it names: every such path is resolved beneath the
// volume's directory with openat2(2)'s RESOLVE_BENEATH — ".." that would
// leave it, an absolute symlink, a symlink to anything outside, a /proc magic
// link: all fail with EXDEV — and mounted through the descriptor that
// resolution returned (/proc/self/fd/N), never by its path again, so that a
// symlink swapped in between cannot redirect the mount (no race). Missing
// directories are made one by one, each beneath the volume too.

// resolveBeneath is how every such path is resolved.
var resolveBeneath = &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}

// errOutside is a path that resolves outside its volume.
var errOutside = errors.New("resolves outside the volume")

// cleanRel checks that rel is relative and stays below its root textually,
// and returns it clean ("." for the root itself).
func cleanRel(rel string) (string, error) {
	clean := filepath.Clean(rel)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q is not a relative path below the volume", rel)
	}
	return clean, nil
}

// openBeneath opens (O_PATH) rel beneath the directory root, and with mkdir
// first makes the missing directories of rel, each beneath root. The caller
// closes the descriptor.
func openBeneath(root, rel string, mkdir bool) (int, error) {
	rel, err := cleanRel(rel)
	if err != nil {
		return -1, err
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening %s: %w", root, err)
	}
	defer func() { _ = unix.Close(rootFD) }()
	if mkdir && rel != "." {
		if err := mkdirBeneath(rootFD, rel); err != nil {
			return -1, fmt.Errorf("%s below %s: %w", rel, root, err)
		}
	}
	fd, err := openat2(rootFD, rel, resolveBeneath)
	if err != nil {
		return -1, fmt.Errorf("%s below %s: %w", rel, root, err)
	}
	return fd, nil
}

// openat2 is unix.Openat2, retried on EAGAIN (a rename elsewhere raced the
// resolution) and with EXDEV named.
func openat2(dirFD int, path string, how *unix.OpenHow) (int, error) {
	for range 10 {
		fd, err := unix.Openat2(dirFD, path, how)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) && how.Resolve&unix.RESOLVE_NO_MAGICLINKS != 0:
			return -1, fmt.Errorf("%w (%v)", errOutside, err)
		}
		return fd, err
	}
	return -1, fmt.Errorf("resolving %s: %w", path, unix.EAGAIN)
}

// mkdirBeneath makes each missing directory of rel below rootFD: the parent
// of each is resolved beneath the root and the directory made in what was
// resolved (mkdirat), so no symlink leads a new directory elsewhere.
func mkdirBeneath(rootFD int, rel string) error {
	parts := strings.Split(rel, "/")
	for i := range parts {
		fd, err := openat2(rootFD, strings.Join(parts[:i+1], "/"), resolveBeneath)
		if err == nil {
			_ = unix.Close(fd)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return err
		}
		parent := "."
		if i > 0 {
			parent = strings.Join(parts[:i], "/")
		}
		pfd, err := openat2(rootFD, parent, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveBeneath.Resolve})
		if err != nil {
			return err
		}
		err = unix.Mkdirat(pfd, parts[i], 0o755)
		_ = unix.Close(pfd)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("making %s: %w", strings.Join(parts[:i+1], "/"), err)
		}
	}
	return nil
}

// createFileBeneath makes rel a file below root if nothing is there (its
// directories too), beneath root all the way.
func createFileBeneath(root, rel string) error {
	rel, err := cleanRel(rel)
	if err != nil {
		return err
	}
	if dir := filepath.Dir(rel); dir != "." {
		fd, err := openBeneath(root, dir, true)
		if err != nil {
			return err
		}
		_ = unix.Close(fd)
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(rootFD) }()
	fd, err := openat2(rootFD, rel, &unix.OpenHow{Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_CLOEXEC, Mode: 0o644, Resolve: resolveBeneath.Resolve})
	if err != nil {
		return fmt.Errorf("%s below %s: %w", rel, root, err)
	}
	return unix.Close(fd)
}

// statFD is the mode of what fd refers to.
func statFD(fd int) (os.FileMode, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	mode := os.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= os.ModeDir
	case unix.S_IFLNK:
		mode |= os.ModeSymlink
	}
	return mode, nil
}

// statBeneath is the mode of rel beneath root, resolved as a mount would be.
func statBeneath(root, rel string) (os.FileMode, error) {
	fd, err := openBeneath(root, rel, false)
	if err != nil {
		return 0, err
	}
	defer func() { _ = unix.Close(fd) }()
	return statFD(fd)
}
