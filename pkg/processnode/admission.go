package processnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// A process node runs its pods as root on its host, with the host's files. On
// a cluster that others use it is tainted, so that only pods that ask for it
// land there, and it refuses the pods bound to it that do not tolerate its
// taints (a pod that names spec.nodeName skips the scheduler, and a DaemonSet's
// pods tolerate the node.kubernetes.io taints, not this one); hostPath volumes
// are honoured only under Config.AllowedHostPaths.

// ProcessNodeTaint is the taint a process node registers with unless
// Config.Untainted: NoSchedule, key ProcessNodeLabel.
var ProcessNodeTaint = corev1.Taint{Key: ProcessNodeLabel, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// Reasons of the pods a process node refuses (the pod's status.reason, phase Failed).
const (
	ReasonTaintNotTolerated  = "ProcessNodeTaintNotTolerated"
	ReasonHostPathNotAllowed = "HostPathNotAllowed"
)

// admissionError is a pod the node refuses, with the reason of its status.
type admissionError struct{ reason, msg string }

func (e *admissionError) Error() string { return e.msg }

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	return slices.ContainsFunc(taints, func(x corev1.Taint) bool { return x.MatchTaint(&t) })
}

// admit checks a pod against the node's taints and allowed host paths before
// anything of it runs. A toleration of every taint (operator Exists without
// a key) counts only with Config.AcceptWildcardTolerations: DaemonSets of
// agents and log shippers tolerate everything, and would otherwise run as
// root on this host.
func admit(cfg *Config, pod *corev1.Pod) error {
	tolerations := pod.Spec.Tolerations
	wildcard := false
	if !cfg.AcceptWildcardTolerations {
		tolerations = slices.DeleteFunc(slices.Clone(tolerations), func(t corev1.Toleration) bool {
			all := t.Key == "" && t.Operator == corev1.TolerationOpExists
			wildcard = wildcard || all
			return all
		})
	}
	for i := range cfg.Taints {
		t := &cfg.Taints[i]
		if t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		// The scheduler's rule (comparison operators, an alpha feature, off).
		if !corev1helpers.TolerationsTolerateTaint(logr.Discard(), tolerations, t, false) {
			msg := fmt.Sprintf(
				"node %s is a Trainyard process node (it runs pods as root on its host) and takes only pods that tolerate its taint %s; "+
					"add to the pod's spec.tolerations {key: %s, operator: Exists, effect: %s}",
				cfg.NodeName, taintString(t), t.Key, t.Effect)
			if wildcard && corev1helpers.TolerationsTolerateTaint(logr.Discard(), pod.Spec.Tolerations, t, false) {
				msg += "; the pod's toleration of every taint (operator Exists without a key) does not count here " +
					"unless the node is started with trainyard-node --accept-wildcard-tolerations"
			}
			return &admissionError{ReasonTaintNotTolerated, msg}
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		if _, err := allowedHostPath(v.Name, v.HostPath.Path, cfg.AllowedHostPaths); err != nil {
			return err
		}
	}
	return nil
}

func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + string(t.Effect)
	}
	return t.Key + "=" + t.Value + ":" + string(t.Effect)
}

// cleanHostPathRoots makes the allowed host paths absolute, clean and free of
// symlinks, as the paths checked against them are, after checking that each
// is the node's own (checkHostPathRoot) and holds none of protect (the state
// directory, the credential files).
func cleanHostPathRoots(roots, protect []string) ([]string, error) {
	var out []string
	for _, r := range roots {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		if !filepath.IsAbs(r) {
			return nil, fmt.Errorf("processnode: allowed host path %q is not absolute", r)
		}
		resolved, err := checkHostPathRoot(filepath.Clean(r), trustedOwners(protect))
		if err != nil {
			return nil, fmt.Errorf("processnode: allowed host path %q: %w", r, err)
		}
		for _, p := range protect {
			if rp, err := resolveHostPath(p); err == nil && underRoot(rp, resolved) {
				return nil, fmt.Errorf("processnode: allowed host path %q holds %s, which no pod may reach (the node's state or a credential)", r, p)
			}
		}
		out = append(out, resolved)
	}
	return out, nil
}

// trustedOwners are the users who may own the directories above an allowed
// host path: root, the agent's user, and whoever owns the directories of the
// node's state (the first of paths) and above it, who could change the
// agent's own files anyway (a checkout of one's own, run with sudo).
func trustedOwners(paths []string) map[uint32]bool {
	trusted := map[uint32]bool{0: true, uint32(os.Geteuid()): true}
	if len(paths) == 0 {
		return trusted
	}
	for dir := filepath.Clean(paths[0]); ; dir = filepath.Dir(dir) {
		if st, err := os.Stat(dir); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				trusted[sys.Uid] = true
			}
		}
		if dir == "/" || dir == "." {
			return trusted
		}
	}
}

// checkHostPathRoot checks that root, under which pods get host
// directories, is the node's own, making it (0755) when it is missing, and
// returns it with its symlinks resolved: root itself is no symlink, and no
// symlink on the way is an untrusted user's; it is a directory owned by root
// (or the agent's user) that no one else may write, and every directory above
// it is owned by a trusted user and writable by no one else, or sticky (as
// /tmp and /var/tmp: no one may rename what is not theirs there). Otherwise
// another local user could have made it first, or could swap it for a
// symlink, and choose what pods mount.
func checkHostPathRoot(root string, trusted map[uint32]bool) (string, error) {
	owned := func(uid uint32) bool { return trusted[uid] }
	ours := func(uid uint32) bool { return uid == 0 || int(uid) == os.Geteuid() }
	parts := strings.Split(strings.TrimPrefix(root, "/"), "/")
	for i := range parts {
		p := "/" + filepath.Join(parts[:i+1]...)
		st, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return "", err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			continue
		}
		if i == len(parts)-1 {
			return "", fmt.Errorf("%s is a symlink; name the directory itself", p)
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || !owned(sys.Uid) {
			return "", fmt.Errorf("%s is a symlink of another user", p)
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	for dir := resolved; ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return "", err
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		switch {
		case !st.IsDir():
			return "", fmt.Errorf("%s is not a directory", dir)
		case !ok:
			return "", fmt.Errorf("%s: no owner", dir)
		case dir == resolved && !ours(sys.Uid) || !owned(sys.Uid):
			return "", fmt.Errorf("%s is owned by user %d, not by root: another user may have made it; remove it or name another", dir, sys.Uid)
		case st.Mode().Perm()&0o022 != 0 && (dir == resolved || st.Mode()&os.ModeSticky == 0):
			return "", fmt.Errorf("%s may be written by other users (mode %v)", dir, st.Mode())
		}
		if dir == "/" {
			return resolved, nil
		}
	}
}

// resolveHostPath is p, clean, with the symlinks of its longest existing part
// resolved; the rest, not there yet, is appended as it is. A dangling symlink
// is an error: what it would create is not known.
func resolveHostPath(p string) (string, error) {
	p = filepath.Clean(p)
	rest, cur := "", p
	for {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			return "", fmt.Errorf("%s is a dangling symlink", cur)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest, cur = filepath.Join(filepath.Base(cur), rest), parent
	}
}

func underRoot(p, root string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}

// allowedHostPath resolves the hostPath of volume vol and checks that it lies
// under one of roots; it returns the resolved path.
func allowedHostPath(vol, path string, roots []string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", &admissionError{ReasonHostPathNotAllowed, fmt.Sprintf("hostPath volume %s: path %q is not absolute", vol, path)}
	}
	resolved, err := resolveHostPath(path)
	if err != nil {
		return "", &admissionError{ReasonHostPathNotAllowed, fmt.Sprintf("hostPath volume %s: %v", vol, err)}
	}
	for _, r := range roots {
		if underRoot(resolved, r) {
			return resolved, nil
		}
	}
	allowed := "none is allowed"
	if len(roots) > 0 {
		allowed = "allowed: " + strings.Join(roots, ", ")
	}
	shown := path
	if resolved != filepath.Clean(path) {
		shown += " (" + resolved + ")"
	}
	return "", &admissionError{ReasonHostPathNotAllowed, fmt.Sprintf(
		"hostPath volume %s: %s is outside the host paths this process node allows (%s; trainyard-node --allowed-host-paths)", vol, shown, allowed)}
}

// syncNodeTaints puts the node's own taints on the Node of the API server, as
// syncNodeLabels does its labels: the node controller registers a new Node
// with them but leaves the spec of one that exists. ProcessNodeTaint is
// removed when the node now runs untainted; other taints stay.
func syncNodeTaints(ctx context.Context, client kubernetes.Interface, cfg *Config) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := client.CoreV1().Nodes().Get(ctx, cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", cfg.NodeName, err)
		}
		var taints []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key == ProcessNodeTaint.Key {
				continue // the node's own, added again below when it has it
			}
			taints = append(taints, t)
		}
		for _, t := range cfg.Taints {
			if !hasTaint(taints, t) {
				taints = append(taints, t)
			}
		}
		same := func(a, b corev1.Taint) bool { return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect }
		if len(taints) == len(n.Spec.Taints) && !slices.ContainsFunc(taints, func(t corev1.Taint) bool {
			return !slices.ContainsFunc(n.Spec.Taints, func(u corev1.Taint) bool { return same(t, u) })
		}) {
			return nil // the same, in another order (the API server adds node.kubernetes.io/not-ready first)
		}
		n.Spec.Taints = taints
		_, err = client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}
