package processnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestVolumesAndMountPlan(t *testing.T) {
	dir := t.TempDir()
	pod := testPod()
	mode := int32(0o600)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "script", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec", DefaultMode: &mode,
			Items: []corev1.KeyToPath{{Key: "TOKEN", Path: "nested/token"}}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "rank", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}}}},
	}
	pod.Spec.Containers = []corev1.Container{{Name: "node", VolumeMounts: []corev1.VolumeMount{
		{Name: "script", MountPath: "/opt/mnist", ReadOnly: true},
		{Name: "sec", MountPath: "/etc/token", SubPath: "nested/token"},
		{Name: "scratch", MountPath: "/data/$(RANK)"},
		{Name: "scratch", MountPath: "/work/out", SubPathExpr: "out-$(RANK)"},
		{Name: "shm", MountPath: "/dev/shm"},
		{Name: "info", MountPath: "/etc/podinfo"},
	}}}
	src := fakeSources{
		cms:     map[string]*corev1.ConfigMap{"team/cfg": {Data: map[string]string{"mnist.py": "print('hi')"}}},
		secrets: map[string]*corev1.Secret{"team/sec": {Data: map[string][]byte{"TOKEN": []byte("s3cret")}}},
	}
	paths, tmpfs, err := materializeVolumes(context.Background(), PodRef{Pod: pod}, dir, src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "volumes", "script", "mnist.py")); string(b) != "print('hi')" {
		t.Errorf("configMap file: %q", b)
	}
	st, err := os.Stat(filepath.Join(dir, "volumes", "sec", "nested", "token"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode: %v %v", st, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "volumes", "info", "rank")); string(b) != "1" {
		t.Errorf("downward API file: %q", b)
	}
	plan, err := mountPlan(pod, paths, map[string][]string{"node": {"RANK=1"}}, filepath.Join(dir, "hosts"), tmpfs)
	if err != nil {
		t.Fatal(err)
	}
	v := func(name string) string { return filepath.Join(dir, "volumes", name) }
	want := []mountSpec{
		{Target: v("shm"), Tmpfs: true},
		{Source: v("scratch"), Target: "/data/$(RANK)"}, // mountPath is not expanded, as in Kubernetes
		{Source: v("shm"), Target: "/dev/shm"},
		{Source: v("info"), Target: "/etc/podinfo"},
		{Source: v("sec"), SubPath: "nested/token", Target: "/etc/token", File: true},
		{Source: v("script"), Target: "/opt/mnist", ReadOnly: true},
		{Source: v("scratch"), SubPath: "out-1", Target: "/work/out"},
		{Source: filepath.Join(dir, "hosts"), Target: "/etc/hosts", File: true},
	}
	if d := cmp.Diff(want, plan, cmp.AllowUnexported(mountSpec{})); d != "" {
		t.Errorf("mount plan (-want +got):\n%s", d)
	}

	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "other", VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/opt/mnist"}}})
	if _, err := mountPlan(pod, paths, nil, "", nil); err == nil {
		t.Error("two containers mounting different volumes at one path must be refused (one mount namespace per pod)")
	}
}

// TestSubPathBeneathVolume (issue #40): a subPath or subPathExpr is
// resolved beneath its volume, whatever the pod put into it: a symlink to
// the host's /, to a directory outside, a ".." through a symlink, all fail the
// pod; a symlink within the volume works; and a subPath that is missing is
// made beneath the volume, never through a symlink elsewhere. Before, the
// path was joined and bind-mounted as it was, so a symlink in an emptyDir
// mounted any host directory (and MkdirAll made directories outside).
func TestSubPathBeneathVolume(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	paths, _, err := materializeVolumes(context.Background(), PodRef{Pod: pod}, dir, fakeSources{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(dir, "volumes", "scratch")
	// What a container of the pod wrote into its emptyDir.
	for link, target := range map[string]string{"root": "/", "out": outside, "up": "..", "inside": "data"} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(vol, "data", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for sub, wantOK := range map[string]bool{
		"root": false, "root/etc": false, "out": false, "out/new/dir": false, "up": false, "up/volumes": false,
		"inside": true, "inside/sub": true, "data/sub": true, "made/here": true,
	} {
		pod.Spec.Containers = []corev1.Container{{Name: "node", VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/mnt", SubPath: sub}}}}
		plan, err := mountPlan(pod, paths, nil, "", nil)
		if wantOK != (err == nil) {
			t.Errorf("subPath %q: plan %v, error %v; want allowed %v", sub, plan, err, wantOK)
		}
		if !wantOK && (err == nil || !strings.Contains(err.Error(), "outside the volume")) {
			t.Errorf("subPath %q: error %v, want it to say it resolves outside the volume", sub, err)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("a subPath through a symlink made %v in a directory outside the volume", entries)
	}
	if _, err := os.Stat(filepath.Join(vol, "made", "here")); err != nil {
		t.Errorf("a missing subPath is made in the volume: %v", err)
	}
	// The sandbox resolves it again, beneath the volume, when it mounts:
	// a subPath checked as a directory, then swapped for a symlink to /.
	fd, err := openBeneath(vol, "made/here", false)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(fd)
	if err := os.RemoveAll(filepath.Join(vol, "made")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", filepath.Join(vol, "made")); err != nil {
		t.Fatal(err)
	}
	if fd, err := openBeneath(vol, "made/here", false); err == nil || !errors.Is(err, errOutside) {
		_ = unix.Close(fd)
		t.Errorf("a subPath swapped for a symlink to / after the check: %v, want it refused", err)
	}
}

func TestUnsupportedVolume(t *testing.T) {
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "pvc", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
	if _, _, err := materializeVolumes(context.Background(), PodRef{Pod: pod}, t.TempDir(), fakeSources{}, nil, nil); err == nil {
		t.Error("a PVC is not supported on a process node")
	}
}

// TestProjectedTokenVolume: the status server's volume (a pod-bound token for
// the TrainJob's audience and ca.crt from the job's ConfigMap) is written as
// a kubelet writes it, the token asked for with the TokenRequest API.
func TestProjectedTokenVolume(t *testing.T) {
	dir := t.TempDir()
	pod := testPod()
	aud := "trainer.kubeflow.org/v1alpha1/namespaces/team/trainjobs/job/status"
	pod.Spec.Volumes = []corev1.Volume{{Name: "kubeflow-trainer-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: aud, ExpirationSeconds: ptr.To[int64](3600), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "job-tls-config"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
		},
	}}}}
	src := fakeSources{cms: map[string]*corev1.ConfigMap{"team/job-tls-config": {Data: map[string]string{"ca.crt": "PEM"}}}}
	type call struct {
		NS, SA string
		Spec   authenticationv1.TokenRequestSpec
	}
	var calls []call
	tokens := apiTokens{create: func(_ context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		calls = append(calls, call{ns, sa, tr.Spec})
		return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: "jwt"}}, nil
	}}
	if _, _, err := materializeVolumes(context.Background(), PodRef{Pod: pod}, dir, src, tokens, nil); err != nil {
		t.Fatal(err)
	}
	want := []call{{NS: "team", SA: "sa", Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{aud}, ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "job-node-0-1-abcde", UID: "uid-1"},
	}}}
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("TokenRequests (-want +got):\n%s", d)
	}
	files := map[string]string{}
	for _, f := range []string{"token", "ca.crt"} {
		b, err := os.ReadFile(filepath.Join(dir, "volumes", "kubeflow-trainer-token", f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(b)
	}
	if d := cmp.Diff(map[string]string{"token": "jwt", "ca.crt": "PEM"}, files); d != "" {
		t.Errorf("volume files (-want +got):\n%s", d)
	}
}

func TestRenewToken(t *testing.T) {
	dir := t.TempDir()
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "tok", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o600),
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "a", ExpirationSeconds: ptr.To[int64](3600), Path: "token"}}}}}},
		{Name: "plain", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	n := 0
	tokens := apiTokens{create: func(context.Context, string, string, *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		n++
		return &authenticationv1.TokenRequest{Status: authenticationv1.TokenRequestStatus{Token: fmt.Sprintf("jwt-%d", n)}}, nil
	}}
	if _, _, err := materializeVolumes(context.Background(), PodRef{Pod: pod}, dir, fakeSources{}, tokens, nil); err != nil {
		t.Fatal(err)
	}
	files := projectedTokens(pod, dir)
	path := filepath.Join(dir, "volumes", "tok", "token")
	if len(files) != 1 || files[0].path != path || renewAfter(files[0].src) != 48*time.Minute {
		t.Fatalf("projectedTokens = %+v, want the one token at %s renewed after 48m", files, path)
	}
	if err := renewToken(context.Background(), pod, tokens, files[0]); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	st, _ := os.Stat(path)
	if err != nil || string(b) != "jwt-2" || st.Mode().Perm() != 0o600 {
		t.Errorf("renewed token file: %q (mode %v), %v; want jwt-2 with mode 0600", b, st.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "volumes", "tok", ".token-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
