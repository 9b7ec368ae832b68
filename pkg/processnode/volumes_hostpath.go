package processnode

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// hostPathVolume checks a hostPath volume's path against roots, creates it
// when its type says so, and returns it as a path below the root it lies
// under: the check resolves its symlinks, and the volume is then created,
// checked and mounted beneath that root, so that no symlink (there before,
// or swapped in since) leads it outside.
func hostPathVolume(name string, h *corev1.HostPathVolumeSource, roots []string) (volumeSource, error) {
	p, err := allowedHostPath(name, h.Path, roots)
	if err != nil {
		return volumeSource{}, err
	}
	var vs volumeSource
	for _, r := range roots {
		if underRoot(p, r) {
			rel, err := filepath.Rel(r, p)
			if err != nil {
				return volumeSource{}, err
			}
			vs = volumeSource{root: r, rel: rel}
			break
		}
	}
	if err := prepareHostPath(vs, h); err != nil {
		if errors.Is(err, errOutside) {
			return volumeSource{}, &admissionError{ReasonHostPathNotAllowed, fmt.Sprintf(
				"hostPath volume %s: %s %v, outside the allowed host path %s (trainyard-node --allowed-host-paths)", name, h.Path, err, vs.root)}
		}
		return volumeSource{}, err
	}
	return vs, nil
}

func prepareHostPath(vs volumeSource, h *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	p := filepath.Join(vs.root, vs.rel)
	mode, err := statBeneath(vs.root, vs.rel)
	missing := errors.Is(err, unix.ENOENT)
	if err != nil && !missing {
		return err
	}
	switch t {
	case corev1.HostPathDirectoryOrCreate:
		if missing {
			fd, err := openBeneath(vs.root, vs.rel, true)
			if err != nil {
				return err
			}
			return unix.Close(fd)
		}
	case corev1.HostPathFileOrCreate:
		if missing {
			return createFileBeneath(vs.root, vs.rel)
		}
	case corev1.HostPathUnset:
		if missing {
			return &ConfigError{Msg: fmt.Sprintf("hostPath %s does not exist", p)}
		}
	default:
		if err != nil {
			return &ConfigError{Msg: fmt.Sprintf("hostPath %s: %v", p, err)}
		}
		if t == corev1.HostPathDirectory && !mode.IsDir() || t == corev1.HostPathFile && mode.IsDir() {
			return &ConfigError{Msg: fmt.Sprintf("hostPath %s is not a %s", p, t)}
		}
	}
	return nil
}
