package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// debian makes the training images' rootfs in its cache directory:
//
//	debs/                     the .deb files debootstrap and apt download, kept
//	rootfs/base-<key>/        debootstrap's minbase with BasePackages
//	rootfs/<image>-<key>/     an overlayfs upper directory over the base: what
//	                          apt-get install and the setup changed
//	layers/<name>-<key>.tar.gz the layer of a rootfs (rootfsLayer)
//
// A directory is complete once it has its name; work is done under .tmp names.
type debian struct {
	cache string
	logf  func(format string, a ...any)
}

// rootfs is one directory of the cache; upper is true for an overlayfs upper
// directory (whose whiteouts the layer turns into OCI's).
type rootfs struct {
	dir   string
	key   string
	upper bool
}

// aptEnv is the environment of debootstrap and of apt in the chroot.
var aptEnv = []string{"DEBIAN_FRONTEND=noninteractive", "LC_ALL=C.UTF-8", "LANG=C.UTF-8",
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

func hashOf(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])[:16]
}

func baseKey() string {
	return hashOf(Suite, Mirror, "minbase", strings.Join(BasePackages, ","), baseCleanup)
}

func (ti TrainingImage) key() string {
	return hashOf(baseKey(), strings.Join(ti.Packages, ","), ti.Setup, imageCleanup)
}

// What no image keeps: downloaded package lists and archives, logs, the
// host's resolv.conf (a container gets its own), and the device nodes
// debootstrap makes (a runtime mounts /dev).
const (
	baseCleanup  = "rm -rf /var/cache/apt/archives/*.deb /var/lib/apt/lists/* /var/log/* /etc/resolv.conf /etc/hostname /dev/*"
	imageCleanup = "rm -rf /var/cache/apt/*.bin /var/lib/apt/lists/* /var/log/apt /var/log/dpkg.log /var/log/alternatives.log /usr/sbin/policy-rc.d /etc/resolv.conf"
)

// base runs debootstrap unless the cache has its rootfs.
func (d debian) base(ctx context.Context) (rootfs, error) {
	r := rootfs{dir: filepath.Join(d.cache, "rootfs", "base-"+baseKey()), key: baseKey()}
	if _, err := os.Stat(r.dir); err == nil {
		return r, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return r, errors.New("debootstrap is not installed: apt-get install debootstrap (pkg/localcluster/packages/debian-packages.sh)")
	}
	debs := filepath.Join(d.cache, "debs")
	tmp := r.dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return r, err
	}
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return r, err
	}
	start := time.Now()
	if err := run(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(BasePackages, ","),
		"--cache-dir="+debs, Suite, tmp, Mirror); err != nil {
		return r, err
	}
	if err := run(ctx, "chroot", tmp, "/bin/sh", "-c", baseCleanup); err != nil {
		return r, err
	}
	d.logf("debootstrap %s with %s in %s", Suite, strings.Join(BasePackages, ","), time.Since(start).Round(time.Second))
	return r, os.Rename(tmp, r.dir)
}

// image installs the image's packages over base in an overlayfs, and runs its
// setup, unless the cache has its upper directory.
func (d debian) image(ctx context.Context, base rootfs, ti TrainingImage) (r rootfs, err error) {
	r = rootfs{dir: filepath.Join(d.cache, "rootfs", ti.Name+"-"+ti.key()), key: ti.key(), upper: true}
	if _, err := os.Stat(r.dir); err == nil {
		return r, nil
	}
	tmp := r.dir + ".tmp"
	upper, work, merged := filepath.Join(tmp, "upper"), filepath.Join(tmp, "work"), filepath.Join(tmp, "merged")
	if err := os.RemoveAll(tmp); err != nil {
		return r, err
	}
	for _, dir := range []string{upper, work, merged} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return r, err
		}
	}
	start := time.Now()
	var mounts []string // unmounted in reverse, also on failure
	defer func() {
		for i := len(mounts) - 1; i >= 0; i-- {
			if uerr := unix.Unmount(mounts[i], unix.MNT_DETACH); uerr != nil && err == nil {
				err = fmt.Errorf("unmount %s: %w", mounts[i], uerr)
			}
		}
		_ = os.RemoveAll(tmp)
	}()
	mount := func(source, target, fstype string, flags uintptr, data string) error {
		if err := unix.Mount(source, target, fstype, flags, data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", source, target, err)
		}
		mounts = append(mounts, target)
		return nil
	}
	// The debs apt downloads go to the cache, so that an image rebuilt with
	// one more package downloads that one only.
	debs := filepath.Join(d.cache, "debs")
	if err := os.MkdirAll(filepath.Join(debs, "partial"), 0o755); err != nil {
		return r, err
	}
	if err := mount("overlay", merged, "overlay", 0, "lowerdir="+base.dir+",upperdir="+upper+",workdir="+work); err != nil {
		return r, err
	}
	if err := mount("proc", filepath.Join(merged, "proc"), "proc", 0, ""); err != nil {
		return r, err
	}
	// The host's /dev: maintainer scripts write to /dev/null.
	if err := mount("/dev", filepath.Join(merged, "dev"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return r, err
	}
	if err := mount(debs, filepath.Join(merged, "var/cache/apt/archives"), "", unix.MS_BIND, ""); err != nil {
		return r, err
	}
	// Name resolution for apt, and no service started by a package's
	// postinst (policy-rc.d 101: "action not allowed").
	resolv, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(merged, "etc/resolv.conf"), resolv, 0o644); err != nil {
		return r, err
	}
	if err := os.WriteFile(filepath.Join(merged, "usr/sbin/policy-rc.d"), []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
		return r, err
	}
	script := "set -e\napt-get update -qq\napt-get install -y -qq --no-install-recommends " + strings.Join(ti.Packages, " ") +
		"\n" + ti.Setup + "\nmkdir -p " + filepath.Dir(ManifestPath) +
		"\ndpkg-query -W -f '${Package} ${Version}\\n' | sort > " + ManifestPath + "\n" + imageCleanup + "\n"
	if err := run(ctx, "chroot", merged, "/bin/sh", "-c", script); err != nil {
		return r, err
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil {
			return r, fmt.Errorf("unmount %s: %w", mounts[i], err)
		}
	}
	mounts = nil
	d.logf("installed %s over the base in %s", strings.Join(ti.Packages, " "), time.Since(start).Round(time.Second))
	return r, os.Rename(upper, r.dir)
}

// run runs a command with apt's environment, its output in the error.
func run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = aptEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		tail := string(out)
		if len(tail) > 4000 {
			tail = "..." + tail[len(tail)-4000:]
		}
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail)
	}
	return nil
}
