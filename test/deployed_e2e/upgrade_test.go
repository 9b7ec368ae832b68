package deployed_e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/e2eutil"
)

// The tests of this file change the installation: they run last (the
// files' order), in this order.

// TestHelmUpgradeKeepsRunningJob: `helm upgrade` to a changed value rolls
// every manager pod, and a TrainJob that runs meanwhile keeps its JobSet and
// pods and completes.
func TestHelmUpgradeKeepsRunningJob(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	key := createLocalTrainJob(t, ctx, "torch-runtime.yaml", "torch-distributed-local", "through-upgrade",
		&trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"python3", "-c", "import time; time.sleep(75); print('UPGRADE_JOB_DONE')"}})
	var js jobsetv1alpha2.JobSet
	e2eutil.WaitFor(t, 3*time.Minute, func() error {
		var got trainer.TrainJob
		if err := c.Client().Get(ctx, key, &got); err != nil {
			return err
		}
		if got.Status.Phase != trainer.TrainJobRunning {
			return fmt.Errorf("phase %s: %s", got.Status.Phase, got.Status.Message)
		}
		return c.Client().Get(ctx, key, &js)
	})
	before := podNames(managerPods(t, ctx))
	start := time.Now()
	out, err := helm(ctx, append([]string{"upgrade", release, chartDir(), "--namespace", managerNS, "--reuse-values",
		"--set", "extraArgs={--zap-log-level=debug}", "--wait", "--timeout", "4m"}, imageValues()...)...)
	if err != nil {
		t.Fatalf("helm upgrade: %v\n%s\n%s", err, out, describeManager(ctx))
	}
	t.Logf("helm upgrade --wait: %s", time.Since(start).Round(100*time.Millisecond))
	e2eutil.WaitFor(t, 2*time.Minute, func() error {
		pods := managerPods(t, ctx)
		for _, p := range pods {
			if slices.Contains(before, p.Name) || !slices.Contains(p.Spec.Containers[0].Args, "--zap-log-level=debug") {
				return fmt.Errorf("pod %s of before the upgrade still runs", p.Name)
			}
		}
		if len(pods) < 2 {
			return fmt.Errorf("%d manager pods run", len(pods))
		}
		return nil
	})
	cond := waitFinished(t, ctx, key)
	if cond.Type != trainer.TrainJobComplete {
		t.Fatalf("TrainJob %s: %s/%s: %s", key, cond.Type, cond.Reason, cond.Message)
	}
	var after jobsetv1alpha2.JobSet
	if err := c.Client().Get(ctx, key, &after); err != nil {
		t.Fatal(err)
	}
	if after.UID != js.UID {
		t.Errorf("the JobSet was recreated across the upgrade (UID %s, then %s)", js.UID, after.UID)
	}
}

// TestHelmUninstallLeavesNothing: `helm uninstall` removes every object of
// the release and leaves no other Trainyard object in the manager's
// namespace or the cluster; the CRDs stay, as the chart documents.
func TestHelmUninstallLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	manifest, err := helm(ctx, "get", "manifest", release, "--namespace", managerNS)
	if err != nil {
		t.Fatalf("%v: %s", err, manifest)
	}
	file := filepath.Join(t.TempDir(), "release.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := helm(ctx, "uninstall", release, "--namespace", managerNS, "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	// Every object of the release: kubectl get prints what it still finds.
	out, _ := kubectl(ctx, "get", "-f", file, "--ignore-not-found", "-o", "name")
	if left := strings.TrimSpace(out); left != "" {
		t.Errorf("objects of the release left after helm uninstall:\n%s", left)
	}
	e2eutil.WaitFor(t, time.Minute, func() error { return leftInNamespace(ctx) })
	// Cluster-scoped objects named for Trainyard; the chart's runtimes are
	// release objects (above), those the tests applied are the user's.
	for _, kind := range []string{"clusterroles", "clusterrolebindings", "validatingwebhookconfigurations",
		"mutatingwebhookconfigurations"} {
		out, err := kubectl(ctx, "get", kind, "-o", "name")
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, n := range strings.Fields(out) {
			if strings.Contains(n, "trainyard") {
				t.Errorf("%s left after helm uninstall", n)
			}
		}
	}
	for _, crd := range []string{"trainjobs.trainer.kubeflow.org", "trainingruntimes.trainer.kubeflow.org",
		"clustertrainingruntimes.trainer.kubeflow.org", "pytorchjobs.kubeflow.org"} {
		if out, err := kubectl(ctx, "get", "crd", crd, "-o", "name"); err != nil {
			t.Errorf("CRD %s gone after helm uninstall, which keeps the CRDs: %v: %s", crd, err, out)
		}
	}
}

// leftInNamespace reports what is left in the manager's namespace besides
// what Kubernetes puts in every namespace.
func leftInNamespace(ctx context.Context) error {
	var left []string
	for _, kind := range []string{"pods", "services", "secrets", "configmaps", "serviceaccounts", "roles",
		"rolebindings", "leases.coordination.k8s.io", "deployments", "networkpolicies", "poddisruptionbudgets"} {
		out, err := kubectl(ctx, "get", kind, "-n", managerNS, "-o", "name")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		for _, n := range strings.Fields(out) {
			if n != "configmap/kube-root-ca.crt" && n != "serviceaccount/default" {
				left = append(left, n)
			}
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left in %s after helm uninstall: %v", managerNS, left)
	}
	return nil
}

// TestStandaloneOverlay: the kustomize standalone overlay, with the local
// image in place of the released one, installs the manager the same way
// (kubectl apply --server-side -k, as its kustomization says): its
// Deployment becomes available and its webhooks reject a bad TrainJob
// through their Service; kubectl delete -k removes it.
func TestStandaloneOverlay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(repo, "manifests", "overlays", "standalone"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(managerImage, ":")
	kust := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: ghcr.io/trainyard/trainyard-manager
  newName: %s
  newTag: %s
patches:
- target: {kind: Deployment, name: trainyard-manager}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/0/imagePullPolicy, value: Never}
`, rel, managerImage[:i], managerImage[i+1:])
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, err := kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-k", dir); err != nil {
		t.Fatalf("kubectl apply -k: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = kubectl(context.Background(), "delete", "-k", dir, "--ignore-not-found", "--wait=false")
	})
	if out, err := kubectl(ctx, "rollout", "status", "-n", managerNS, "deployment/trainyard-manager", "--timeout=4m"); err != nil {
		t.Fatalf("rollout: %v\n%s\n%s", err, out, describeManager(ctx))
	}
	t.Logf("standalone overlay available in %s", time.Since(start).Round(100*time.Millisecond))
	for _, p := range managerPods(t, ctx) {
		if p.Spec.Containers[0].Image != managerImage {
			t.Errorf("pod %s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, managerImage)
		}
	}
	// The webhook answers once its certificate is in place; readiness waits for it.
	bad := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "2-bad", Namespace: "default"},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}}}
	err = c.Client().Create(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "metadata.name") || apierrors.IsAlreadyExists(err) {
		t.Errorf("TrainJob 2-bad: %v, want the webhook's rejection of metadata.name", err)
	}
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}
