package processnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Projected service account tokens expire (the status server's after an
// hour); a kubelet renews them in place at 80% of their life, so a long
// training job keeps a valid token. The process node does the same for the
// token files materializeVolumes wrote.

// tokenFile is one projected token of a pod, on the host.
type tokenFile struct {
	path string // file under the pod's volumes directory
	src  *corev1.ServiceAccountTokenProjection
	mode os.FileMode
}

// projectedTokens lists the token files of the pod's projected volumes
// below dir, where materializeVolumes writes them.
func projectedTokens(pod *corev1.Pod, dir string) []tokenFile {
	var out []tokenFile
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				out = append(out, tokenFile{
					path: filepath.Join(dir, "volumes", v.Name, filepath.Clean(s.ServiceAccountToken.Path)),
					src:  s.ServiceAccountToken,
					mode: modeOr(v.Projected.DefaultMode, 0o644),
				})
			}
		}
	}
	return out
}

// renewAfter is when a token of this projection is renewed: at 80% of its
// requested life (the API server's default, one hour, when none is asked).
func renewAfter(src *corev1.ServiceAccountTokenProjection) time.Duration {
	secs := int64(3600)
	if src.ExpirationSeconds != nil && *src.ExpirationSeconds > 0 {
		secs = *src.ExpirationSeconds
	}
	return time.Duration(secs) * time.Second * 8 / 10
}

// renewToken asks for a new token and replaces the file atomically (a
// rename in the same directory, which the container's bind mount of that
// directory sees).
func renewToken(ctx context.Context, pod *corev1.Pod, tokens TokenSource, f tokenFile) error {
	tok, err := tokens.Token(ctx, pod, f.src)
	if err != nil {
		return fmt.Errorf("renewing token %s: %w", f.path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), ".token-")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.WriteString(tok); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), f.mode.Perm()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f.path)
}

// renewTokens keeps the pod's token files fresh until done is closed or ctx
// ends; a failed renewal is logged and tried again a minute later.
func renewTokens(ctx context.Context, pod *corev1.Pod, tokens TokenSource, files []tokenFile, done <-chan struct{}, logf func(string, ...interface{})) {
	for _, f := range files {
		go func() {
			wait := renewAfter(f.src)
			for {
				select {
				case <-ctx.Done():
					return
				case <-done:
					return
				case <-time.After(wait):
				}
				wait = renewAfter(f.src)
				if err := renewToken(ctx, pod, tokens, f); err != nil {
					if logf != nil {
						logf("%v", err)
					}
					wait = time.Minute
				}
			}
		}()
	}
}
