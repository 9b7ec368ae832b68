package processnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/trainyard/trainyard/pkg/processnode"
)

// Issue #40: the process node's pods run as root on its host, so they must
// not be able to become the node: the agent holds a node's credential and
// checks it at start, no pod reads its credential files through what it may
// mount, and what a pod mounts stays beneath the volume it names.

// TestAgentRefusesPrivilegedCredential: an agent started with an admin's
// credential, or another node's, refuses to run and says why; before, it
// ran with whatever it was given, which every pod of the node could read.
func TestAgentRefusesPrivilegedCredential(t *testing.T) {
	other, err := testEnv.UserConfig(processnode.NodeUser("another-node"), processnode.NodesGroup)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cfg  *rest.Config
		says []string
	}{
		"an admin":       {testEnv.Config, []string{"more than a node's credential", "may * *.* in every namespace", "--allow-privileged-credentials"}},
		"another node's": {other, []string{`"system:node:another-node"`, `not "system:node:pn-refused"`}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			certs, err := makeCerts(filepath.Join(dir, "pki"))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- processnode.New().Run(ctx, processnode.Config{NodeName: "pn-refused", RESTConfig: tc.cfg, StateDir: filepath.Join(dir, "state"),
					TLSCertFile: certs.serverCert, TLSKeyFile: certs.serverKey, ClientCAFile: certs.ca, PodCIDR: "10.254.201.0/24", NvidiaSMI: "none"})
			}()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				cancel()
				t.Fatalf("the agent runs with that credential (stopped: %v)", <-done)
			}
			if err == nil {
				t.Fatal("the agent stopped without an error")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if _, err := cs.CoreV1().Nodes().Get(ctx, "pn-refused", metav1.GetOptions{}); err == nil {
				t.Error("the refused agent registered its Node")
			}
		})
	}
}

// TestSubPathStaysInVolume: symlinks that another pod left in a hostPath
// directory (here made on the host) lead a subPath nowhere: a pod whose
// subPath resolves outside its volume waits with CreateContainerConfigError
// saying so, and never runs, whether the symlink points at / or at a
// directory outside (where nothing is created); a subPath through a symlink
// within the volume is mounted. Before, the subPath was joined and mounted as
// it was: the pod mounted the host's /.
func TestSubPathStaysInVolume(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	const ns = "subpath"
	createNamespace(t, ctx, ns)
	vol := hostPathDir(t)
	outside := t.TempDir()
	for link, target := range map[string]string{"esc": "/", "out": outside, "in": "real"} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(vol, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	markers := hostPathDir(t)
	pod := func(name, sub string) *corev1.Pod {
		p := shPod(ns, name, "ls /mnt > /dev/null && touch "+filepath.Join(markers, name), corev1.RestartPolicyNever)
		p.Spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: vol, Type: ptr.To(corev1.HostPathDirectory)}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: "/mnt", SubPath: sub}}
		return p
	}
	for name, sub := range map[string]string{"to-root": "esc", "to-outside": "out/new", "inside": "in"} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod(name, sub), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"to-root", "to-outside"} {
		p := waitPod(t, ctx, ns, name, "waiting with CreateContainerConfigError", func(p *corev1.Pod) bool {
			for _, s := range p.Status.ContainerStatuses {
				if w := s.State.Waiting; w != nil && w.Reason == "CreateContainerConfigError" {
					return true
				}
			}
			return false
		})
		if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, "resolves outside the volume") {
			t.Errorf("%s: message %q, want it to say the subPath resolves outside the volume", name, msg)
		}
	}
	p := waitPod(t, ctx, ns, "inside", "finished", finished)
	if p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("inside: phase %s, reason %q, message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
	}
	time.Sleep(time.Second)
	for _, name := range []string{"to-root", "to-outside"} {
		if _, err := os.Stat(filepath.Join(markers, name)); err == nil {
			t.Errorf("%s ran", name)
		}
		if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a subPath through a symlink made %v outside the volume", entries)
	}
}

// TestCredentialFilesHidden: the agent's credential file reads empty in a
// pod's view of the host (it is the host's file elsewhere).
func TestCredentialFilesHidden(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	const ns = "credentials"
	createNamespace(t, ctx, ns)
	p := shPod(ns, "reader", "echo \"[$(cat "+credentialFile+")]\"", corev1.RestartPolicyNever)
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, ctx, ns, "reader", "finished", finished)
	if logs := kubeletLogs(t, ns, "reader", "c", ""); got.Status.Phase != corev1.PodSucceeded || logs != "[]\n" {
		t.Errorf("the pod read %q from the agent's credential file (phase %s), want nothing", logs, got.Status.Phase)
	}
	if b, err := os.ReadFile(credentialFile); err != nil || len(b) == 0 {
		t.Errorf("the credential file on the host: %q, %v", b, err)
	}
}
