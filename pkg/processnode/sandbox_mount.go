package processnode

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// setupSandbox sets the hostname and makes the pod's mounts. The mount namespace
// is already private (the agent starts us with CLONE_NEWNS, which makes "/"
// recursively private), so nothing here reaches the host. It returns the pod
// directory opened (O_PATH) in the pod's final root, before any volume is
// mounted: the containers' root directories are reached through it.
func setupSandbox(spec sandboxSpec) (int, error) {
	fd := -1
	err := func() error {
		if spec.Hostname != "" {
			if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
				return fmt.Errorf("sethostname: %w", err)
			}
		}
		m := &mounter{podDir: spec.PodDir, podDirRef: spec.PodDir, owned: map[string]bool{}}
		// A new top-level directory means a new root (see shadow): pivot first,
		// while every path still resolves, so that what is pinned below lives in
		// the new root.
		for _, p := range append(targets(spec.Mounts), spec.Dirs...) {
			top := filepath.Join("/", strings.SplitN(strings.TrimPrefix(filepath.Clean(p), "/"), "/", 2)[0])
			if _, err := os.Lstat(top); err != nil && top != "/" && !m.owned["/"] {
				if err := m.shadow("/"); err != nil {
					return fmt.Errorf("shadowing /: %w", err)
				}
			}
		}
		// A mount may cover the state directory (an emptyDir on /tmp when the
		// state lives below /tmp): every path in it is pinned first, as an open
		// descriptor reached through /proc/self/fd, which no later mount hides.
		pin := pinner{}
		defer pin.close()
		podDir, err := pin.path(spec.PodDir)
		if err != nil {
			return fmt.Errorf("pod directory: %w", err)
		}
		// Opened here, after the pivot: a directory reached through a descriptor
		// opened before it lies outside the new root, where getcwd(3) fails.
		if fd, err = unix.Open(spec.PodDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return fmt.Errorf("pod directory: %w", err)
		}
		m.podDirRef = podDir
		mounts := append([]mountSpec(nil), spec.Mounts...)
		// Parents before children.
		sort.SliceStable(mounts, func(i, j int) bool {
			return strings.Count(filepath.Clean(mounts[i].Target), "/") < strings.Count(filepath.Clean(mounts[j].Target), "/")
		})
		for k := range mounts {
			mt := &mounts[k]
			if mt.Tmpfs {
				if m.mayCreateIn(filepath.Clean(mt.Target)) {
					if mt.Target, err = pin.path(mt.Target); err != nil {
						return fmt.Errorf("tmpfs mount target: %w", err)
					}
				}
				continue
			}
			if mt.SubPath != "" {
				// Resolved beneath its volume now, and mounted through the
				// descriptor: nothing the pod changed since the agent's check
				// (a symlink swapped in) redirects it.
				if mt.Source, err = pin.beneath(mt.Source, mt.SubPath); err != nil {
					return fmt.Errorf("mount source for %s: %w", mt.Target, err)
				}
				mt.SubPath = ""
				continue
			}
			if mt.Source, err = pin.path(mt.Source); err != nil {
				return fmt.Errorf("mount source for %s: %w", mt.Target, err)
			}
		}
		for _, mt := range mounts {
			if err := m.mount(mt); err != nil {
				return fmt.Errorf("mounting %s: %w", mt.Target, err)
			}
		}
		for _, d := range spec.Dirs {
			if err := m.ensure(filepath.Clean(d), false); err != nil {
				return fmt.Errorf("working directory %s: %w", d, err)
			}
		}
		for _, f := range spec.Hide {
			if err := hide(f); err != nil {
				return fmt.Errorf("hiding %s: %w", f, err)
			}
		}
		if spec.NewProc {
			if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
				return fmt.Errorf("mounting /proc: %w", err)
			}
		}
		return nil
	}()
	if err != nil && fd >= 0 {
		_ = unix.Close(fd)
		fd = -1
	}
	return fd, err
}

// mounter makes mount points exist in the pod's view without creating anything on
// the host: a directory that needs a new entry is first "shadowed" by a tmpfs that
// holds bind mounts of all its entries (the root directory by pivoting into such a
// tmpfs), so the new entry lives in memory of this mount namespace only.
type mounter struct {
	podDir    string
	podDirRef string          // podDir, pinned (see pinner)
	owned     map[string]bool // directories whose entries we may create
	shadows   int
}

func (m *mounter) mount(mt mountSpec) error {
	target := filepath.Clean(mt.Target)
	if err := m.ensure(target, mt.File); err != nil {
		return err
	}
	if mt.Tmpfs {
		return unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0777")
	}
	if err := unix.Mount(mt.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if mt.ReadOnly {
		return unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_REC, "")
	}
	return nil
}

// hide covers the file f, in this mount namespace, with /dev/null, read-only:
// a pod reads nothing there. (A pod runs as root with the host's
// capabilities, so it could unmount it: this keeps credentials out of what a
// pod reads by accident, not out of one that means harm; that is why the
// agent holds a node's credential, checkIdentity.)
func hide(f string) error {
	st, err := os.Stat(f)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if st.IsDir() {
		if err := unix.Mount("tmpfs", f, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "mode=0500,size=4k"); err != nil {
			return err
		}
		return nil
	}
	if err := unix.Mount("/dev/null", f, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", f, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
}

func targets(mounts []mountSpec) []string {
	out := make([]string, 0, len(mounts))
	for _, mt := range mounts {
		out = append(out, mt.Target)
	}
	return out
}

// pinner keeps paths reachable whatever gets mounted over them: path opens
// each with O_PATH and returns /proc/self/fd/<fd>, a link the kernel resolves
// to the opened file itself, for mount(2) as for any other call.
type pinner struct{ fds []int }

func (p *pinner) path(path string) (string, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	p.fds = append(p.fds, fd)
	return "/proc/self/fd/" + strconv.Itoa(fd), nil
}

// beneath pins rel resolved beneath the directory root (openBeneath).
func (p *pinner) beneath(root, rel string) (string, error) {
	fd, err := openBeneath(root, rel, false)
	if err != nil {
		return "", err
	}
	p.fds = append(p.fds, fd)
	return "/proc/self/fd/" + strconv.Itoa(fd), nil
}

func (p *pinner) close() {
	for _, fd := range p.fds {
		_ = unix.Close(fd)
	}
}

// mayCreateIn reports whether entries may be created in dir: a directory of ours
// (a shadow, or made in one) or in the state directory.
func (m *mounter) mayCreateIn(dir string) bool {
	if m.owned[dir] {
		return true
	}
	rel, err := filepath.Rel(m.podDir, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// ensure makes path exist (a directory, or an empty file for file mounts).
func (m *mounter) ensure(path string, file bool) error {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSymlink != 0 {
			if _, err := os.Stat(path); err == nil {
				return nil
			}
			return fmt.Errorf("%s is a dangling symlink", path)
		}
		return nil
	}
	parent := filepath.Dir(path)
	if err := m.ensure(parent, false); err != nil {
		return err
	}
	if !m.mayCreateIn(parent) {
		if err := m.shadow(parent); err != nil {
			return fmt.Errorf("shadowing %s: %w", parent, err)
		}
	}
	if file {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	if err := os.Mkdir(path, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	m.owned[path] = true
	return nil
}

// shadow replaces dir, in this mount namespace, by a tmpfs holding bind mounts
// (recursive, so mounts below stay) of each of its entries.
func (m *mounter) shadow(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	staging := filepath.Join(m.podDirRef, "shadow", strconv.Itoa(m.shadows))
	m.shadows++
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("mode=%o", st.Mode().Perm())); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		src := filepath.Join(dir, e.Name())
		dst := filepath.Join(staging, e.Name())
		info, err := os.Lstat(src)
		if err != nil {
			continue // gone meanwhile
		}
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(t, dst); err != nil {
				return err
			}
			continue
		case info.IsDir():
			if err := os.Mkdir(dst, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, info.Mode().Perm())
			if err != nil {
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", src, err)
		}
	}
	if dir == "/" {
		old := filepath.Join(staging, ".oldroot")
		if err := os.Mkdir(old, 0o700); err != nil {
			return err
		}
		if err := unix.PivotRoot(staging, old); err != nil {
			return fmt.Errorf("pivot_root: %w", err)
		}
		if err := unix.Chdir("/"); err != nil {
			return err
		}
		if err := unix.Unmount("/.oldroot", unix.MNT_DETACH); err != nil {
			return err
		}
		_ = os.Remove("/.oldroot")
	} else if err := unix.Mount(staging, dir, "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("moving shadow onto %s: %w", dir, err)
	}
	m.owned[dir] = true
	return nil
}
