package initializer

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// isMountPoint reports whether dir exists and lies on another device than its parent.
func isMountPoint(dir string) bool {
	var st, pst syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || syscall.Stat(filepath.Dir(filepath.Clean(dir)), &pst) != nil {
		return false
	}
	return st.Dev != pst.Dev
}

// replaceDir moves staging into dest's place. dest may exist (a re-run): it is
// set aside and removed once the new content is in place. When dest is a mount
// point it cannot be renamed, so the staged entries move into it instead.
func replaceDir(staging, dest string) error {
	err := os.Rename(staging, dest)
	if err == nil {
		return nil
	}
	if st, serr := os.Stat(dest); serr == nil && st.IsDir() {
		old := staging + ".old"
		if os.Rename(dest, old) == nil {
			if err := os.Rename(staging, dest); err != nil {
				_ = os.Rename(old, dest)
				return fmt.Errorf("moving the fetched files into %s: %w", dest, err)
			}
			return os.RemoveAll(old)
		}
		// A mount point (the staging directory is inside it): the previous
		// content goes, then the staged entries move up.
		previous, err := os.ReadDir(dest)
		if err != nil {
			return err
		}
		for _, e := range previous {
			if p := filepath.Join(dest, e.Name()); p != staging {
				if err := os.RemoveAll(p); err != nil {
					return err
				}
			}
		}
		entries, err := os.ReadDir(staging)
		if err != nil {
			return err
		}
		for _, e := range entries {
			target := filepath.Join(dest, e.Name())
			if err := os.Rename(filepath.Join(staging, e.Name()), target); err != nil {
				return fmt.Errorf("moving %s into %s: %w", e.Name(), dest, err)
			}
		}
		return os.Remove(staging)
	}
	return fmt.Errorf("moving the fetched files into %s: %w", dest, err)
}
