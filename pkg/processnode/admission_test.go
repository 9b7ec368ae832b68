package processnode

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestHostPathRootChecks (issue #40): an allowed host path must be the
// node's own. A root another local user made first (owned by them), a
// symlink in its place, one others may write, one below a directory others
// may rename into, or one that holds the node's state or a credential file,
// is refused at start; a missing one is made, root's, 0755. Before, any
// existing path was taken as it was (a symlink resolved to wherever it
// pointed).
func TestHostPathRootChecks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the checks compare owners with root") // the agent needs root anyway
	}
	base := t.TempDir() // 0700, root's, below the sticky /tmp
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(rel string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, rel)
		if err := os.MkdirAll(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := mk("good", 0o755, 0)
	other := mk("theirs", 0o755, 1000)
	open := mk("open", 0o777, 0)
	looseParent := mk("loose", 0o777, 0)
	stickyParent := mk("sticky", 0o777|os.ModeSticky, 0)
	state := mk("node/state", 0o755, 0)
	creds := mk("node/creds", 0o700, 0)
	credFile := filepath.Join(creds, "kubeconfig")
	if err := os.WriteFile(credFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	protect := []string{state, credFile}
	// A checkout of user 1001's own, run as root: its state below
	// directories 1001 owns, which is no reason to refuse a root of root's there.
	home := mk("home", 0o755, 1001)
	homeState := mk("home/checkout/state", 0o755, 1001)
	for _, tc := range []struct {
		root, wantErr string
	}{
		{good, ""},
		{filepath.Join(base, "new", "root"), ""},
		{filepath.Join(stickyParent, "root"), ""},
		{other, "owned by user 1000"},
		{filepath.Join(other, "below"), "owned by user 1000"},
		{open, "may be written by other users"},
		{filepath.Join(looseParent, "root"), "may be written by other users"},
		{filepath.Join(base, "link"), "is a symlink"},
		{filepath.Join(base, "node"), "which no pod may reach"},
		{creds, "which no pod may reach"},
		{filepath.Join(home, "checkout", "host-paths"), ""},
		{mk("home/theirs-inside", 0o755, 1001), "owned by user 1001"},
	} {
		prot := protect
		if strings.HasPrefix(tc.root, home) {
			prot = []string{homeState}
		}
		got, err := cleanHostPathRoots([]string{tc.root}, prot)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.root, err)
		case tc.wantErr == "" && (len(got) != 1 || got[0] != tc.root):
			t.Errorf("%s: roots %v", tc.root, got)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want it to say %q", tc.root, err, tc.wantErr)
		}
	}
	if st, err := os.Stat(filepath.Join(base, "new", "root")); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("a missing root is made 0755: %v, %v", st, err)
	}
}

// TestAdmitWildcardToleration (issue #40): a toleration of every taint
// does not count as tolerating the process node's taint unless the node
// accepts it, and the refusal says so; a toleration by key still counts.
func TestAdmitWildcardToleration(t *testing.T) {
	cfg := &Config{NodeName: "pn", Taints: []corev1.Taint{ProcessNodeTaint}}
	wildcard := corev1.Toleration{Operator: corev1.TolerationOpExists}
	byKey := corev1.Toleration{Key: ProcessNodeTaint.Key, Operator: corev1.TolerationOpExists}
	pod := func(tols ...corev1.Toleration) *corev1.Pod {
		p := testPod()
		p.Spec.Tolerations = tols
		return p
	}
	var refused *admissionError
	err := admit(cfg, pod(wildcard))
	if !errors.As(err, &refused) || refused.reason != ReasonTaintNotTolerated ||
		!strings.Contains(refused.msg, "toleration of every taint") || !strings.Contains(refused.msg, "--accept-wildcard-tolerations") {
		t.Errorf("a pod tolerating every taint: %v, want refused, saying why and how to accept it", err)
	}
	if err := admit(cfg, pod(wildcard, byKey)); err != nil {
		t.Errorf("a pod tolerating the taint by key (and every taint): %v", err)
	}
	if err := admit(cfg, pod()); !errors.As(err, &refused) || strings.Contains(refused.msg, "every taint") {
		t.Errorf("a pod tolerating nothing: %v, want refused without a word of wildcards", err)
	}
	cfg.AcceptWildcardTolerations = true
	if err := admit(cfg, pod(wildcard)); err != nil {
		t.Errorf("with AcceptWildcardTolerations, a pod tolerating every taint: %v", err)
	}
}
