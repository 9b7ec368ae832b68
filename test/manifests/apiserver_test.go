package manifests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trainyard/trainyard/pkg/version"
	"github.com/trainyard/trainyard/test/integration/framework"
	"github.com/trainyard/trainyard/test/prereq"
)

// skippedGroups are API groups whose CRDs the test API server does not have:
// cert-manager's Issuer and Certificate, and the Prometheus Operator's
// ServiceMonitor. Objects of these groups are left out of the dry runs.
var skippedGroups = []string{"cert-manager.io/", "monitoring.coreos.com/"}

// apiServer is a real etcd and kube-apiserver (test/integration/framework, with
// Trainyard's, JobSet's and Kueue's CRDs), and an admin kubeconfig for kubectl
// and helm.
type apiServer struct {
	kubectl, kubeconfig string
}

// startAPIServer starts the test control plane, or skips the test when its
// binaries are missing or with -short.
func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not starting kube-apiserver")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(repoRoot, "bin", "k8s")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		_, err := os.Stat(filepath.Join(assets, b))
		prereq.Requiref(t, err == nil, "%s not found in %s: run `make k8s-tools` to check the manifests against a real API server", b, assets)
	}
	kc := kubectl(t)
	env, err := framework.Start()
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	cfg, err := env.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	return &apiServer{kubectl: kc, kubeconfig: path}
}

// run runs kubectl (or, with bin set, another binary) with the kubeconfig of
// the test API server, in the repository root.
func (s *apiServer) run(t *testing.T, stdin []byte, bin string, args ...string) (string, error) {
	t.Helper()
	if bin == "" {
		bin = s.kubectl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--kubeconfig", s.kubeconfig)...)
	cmd.Dir = repoRoot
	if bin != s.kubectl {
		cmd.Env = helmEnv()
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %w\n%s%s", filepath.Base(bin), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), err
}

func (s *apiServer) mustRun(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, err := s.run(t, stdin, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dryRun applies objects with server-side apply in server dry-run mode, which
// runs them through the API server's decoding, defaulting, OpenAPI and CEL
// validation and admission, without storing them. Objects of skippedGroups are
// left out (and logged). It checks that kubectl reports every object applied.
func (s *apiServer) dryRun(t *testing.T, what string, docs []doc) {
	t.Helper()
	var stream bytes.Buffer
	var kept []doc
	var skipped []string
	for _, d := range docs {
		if slicesHasPrefix(d.apiVersion(), skippedGroups) {
			skipped = append(skipped, d.kind()+"/"+d.name())
			continue
		}
		kept = append(kept, d)
		stream.WriteString("---\n")
		stream.Write(d.json)
		stream.WriteString("\n")
	}
	if len(skipped) > 0 {
		t.Logf("%s: not applied (their CRDs are not installed in the test API server): %s", what, strings.Join(skipped, ", "))
	}
	out := s.mustRun(t, stream.Bytes(), "apply", "--server-side", "--dry-run=server", "-f", "-")
	checkApplied(t, what, out, len(kept))
}

// checkApplied checks kubectl's report of a dry run: one line per object.
func checkApplied(t *testing.T, what, out string, want int) {
	t.Helper()
	n := strings.Count(out, "serverside-applied (server dry run)")
	if n != want || want == 0 {
		t.Errorf("%s: %d objects applied, want %d:\n%s", what, n, want, out)
	}
}

func slicesHasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// TestAgainstAPIServer applies the kustomizations, the runtimes and the chart's
// output with server-side dry runs against a real kube-apiserver, and then
// installs, upgrades and uninstalls the chart for real with helm.
//
// The namespaces the namespaced objects go to are created first (for real): a
// dry run does not create the Namespace object it applies, and the API server
// rejects objects in a namespace that does not exist.
func TestAgainstAPIServer(t *testing.T) {
	s := startAPIServer(t)
	for _, ns := range []string{systemNamespace, nonDefaultNamespace, version.SDKNamespace} {
		s.mustRun(t, nil, "create", "namespace", ns)
	}

	t.Run("kustomize", func(t *testing.T) {
		// `kubectl apply -k` itself, for the overlays whose objects the API
		// server knows.
		for _, dir := range []string{"manifests/base", "manifests/overlays/standalone", "manifests/overlays/local"} {
			out := s.mustRun(t, nil, "apply", "--server-side", "--dry-run=server", "-k", dir)
			checkApplied(t, "apply -k "+dir, out, len(render(t, dir)))
		}
		// Every kustomization, rendered and filtered: the cert-manager overlay
		// has cert-manager objects.
		for _, dir := range []string{"manifests/base", "manifests/overlays/standalone", "manifests/overlays/cert-manager", "manifests/overlays/local"} {
			s.dryRun(t, dir, render(t, dir))
		}
	})

	t.Run("runtimes", func(t *testing.T) {
		out := s.mustRun(t, nil, "apply", "--server-side", "--dry-run=server", "-f", "runtimes/")
		checkApplied(t, "runtimes/", out, len(catalog))
	})

	// kubectl explain tells the truth about every field: what the API server
	// publishes of the CRDs' descriptions (TestCRDDescriptions checks that
	// every field has one).
	t.Run("kubectl explain", func(t *testing.T) {
		for path, want := range map[string]string{
			"trainjobs.spec.trainer":                                   "numNodes",
			"trainjobs.spec.trainer.numProcPerNode":                    "auto",
			"trainjobs.spec.podTemplateOverrides.metadata.labels":      "labels to set on the object",
			"trainjobs.status.trainerStatus.progressPercentage":        "how far training is",
			"clustertrainingruntimes.spec.mlPolicy.torch":              "torchrun",
			"pytorchjobs.spec.runPolicy.schedulingPolicy.minAvailable": "scheduled together",
		} {
			out := s.mustRun(t, nil, "explain", path)
			if !strings.Contains(out, "DESCRIPTION:") || !strings.Contains(out, want) {
				t.Errorf("kubectl explain %s does not say %q:\n%s", path, want, out)
			}
		}
	})

	t.Run("chart", func(t *testing.T) {
		helmBin(t)
		s.dryRun(t, "chart, default values", renderChart(t, systemNamespace, nil))
		s.dryRun(t, "chart, non-default values", renderChart(t, nonDefaultReleaseNamespace, nonDefaultValues()))
		s.dryRun(t, "chart, runtime images", renderChart(t, systemNamespace, map[string]any{"runtimes": map[string]any{"catalog": map[string]any{
			"mpi-distributed": map[string]any{"image": "registry.internal/openmpi:1", "images": map[string]any{"launcher/ssh-key": "registry.internal/debian:bookworm-slim"}},
		}}}))
	})

	// Last, as it deletes Trainyard's CRDs.
	t.Run("helm install, upgrade, uninstall", func(t *testing.T) {
		helmLifecycle(t, s)
	})
}

// helmLifecycle installs the chart for real into a cluster without Trainyard's
// CRDs, as a platform team would, and checks the parts of the install story
// that a dry run cannot show:
//   - the first `helm install -n <ns> --create-namespace` creates the CRDs
//     (from crds/), the manager's objects in the release namespace, and the
//     whole runtime catalog, although no manager ever runs: the runtime
//     webhooks skip the chart's runtimes (and do reject other runtimes);
//   - the documented CRD upgrade (`helm show crds | kubectl apply
//     --server-side --force-conflicts`) and `helm upgrade` work;
//   - `helm uninstall` removes everything but the CRDs and the namespace it did
//     not create, and leaves no finalizers behind: deleting a CRD then deletes
//     its TrainJobs at once;
//   - with namespace.create, the chart owns its namespace, and an upgrade that
//     would delete it (as upgrading a release of chart 0.1.0, which created
//     trainyard-system by default, with the new defaults would) is refused.
func helmLifecycle(t *testing.T, s *apiServer) {
	helm := helmBin(t)
	const ns = "trainyard-helm"
	// The CRDs the chart installs (the test API server has them already).
	var crds []string
	for _, d := range renderChart(t, systemNamespace, nil) {
		if d.kind() == "CustomResourceDefinition" {
			crds = append(crds, d.name())
		}
	}
	if !slices.Contains(crds, "trainjobs.trainer.kubeflow.org") {
		t.Fatalf("the chart renders CRDs %q, without trainjobs.trainer.kubeflow.org", crds)
	}
	helmRun := func(args ...string) string {
		t.Helper()
		out, err := s.run(t, nil, helm, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting until %s", what)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	served := func() bool {
		out := s.mustRun(t, nil, "api-resources", "--api-group=trainer.kubeflow.org", "-o", "name", "--cached=false")
		return strings.TrimSpace(out) != ""
	}
	runtimes := func() int {
		t.Helper()
		out := s.mustRun(t, nil, "get", "clustertrainingruntimes", "-l", "app.kubernetes.io/instance="+chartRelease, "-o", "name")
		return len(strings.Fields(out))
	}

	// A cluster without Trainyard.
	s.mustRun(t, nil, append([]string{"delete", "crd", "--wait", "--timeout=60s"}, crds...)...)
	eventually("the API server no longer serves trainer.kubeflow.org", func() bool { return !served() })

	out := helmRun("install", chartRelease, chartDir, "--namespace", ns, "--create-namespace")
	if !strings.Contains(out, "kubectl get clustertrainingruntimes") {
		t.Errorf("the notes of the first install do not show how to list the runtimes:\n%s", out)
	}
	s.mustRun(t, nil, append([]string{"wait", "--for=condition=Established", "--timeout=60s"}, prefixAll("crd/", crds)...)...)
	if n := runtimes(); n != len(catalog) {
		t.Errorf("after the first helm install: %d runtimes, want %d", n, len(catalog))
	}
	for _, obj := range []string{"deployment/trainyard-manager", "service/trainyard-webhook", "secret/trainyard-webhook-cert"} {
		s.mustRun(t, nil, "get", "-n", ns, obj)
	}
	s.mustRun(t, nil, "get", "validatingwebhookconfiguration/"+validatingWebhookName, "mutatingwebhookconfiguration/"+mutatingWebhookName)
	// Without the label, a runtime goes to the webhook, which nothing serves.
	probe := []byte(`{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
 "metadata": {"name": "webhook-probe"},
 "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
  "template": {"metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
   "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "busybox:1.36"}]}}}}}]}}}}`)
	if _, err := s.run(t, probe, "", "create", "-f", "-"); err == nil || !strings.Contains(err.Error(), "vclustertrainingruntime.trainer.kubeflow.org") {
		t.Errorf("creating a runtime without %s=disabled while no manager serves the webhook: error %v, want one from the webhook vclustertrainingruntime.trainer.kubeflow.org", webhookValidationLabel, err)
	}

	// The upgrade: the CRDs first, as docs/install.md says, then the release
	// (one runtime turned off).
	crdStream, err := runHelm(t, "show", "crds", chartDir)
	if err != nil {
		t.Fatal(err)
	}
	out = s.mustRun(t, crdStream, "apply", "--server-side", "--force-conflicts", "-f", "-")
	if n := strings.Count(out, "serverside-applied"); n != len(crds) {
		t.Errorf("helm show crds | kubectl apply: %d CRDs applied, want %d:\n%s", n, len(crds), out)
	}
	helmRun("upgrade", chartRelease, chartDir, "--namespace", ns, "--reuse-values", "--set", "runtimes.catalog.plain-ml.enabled=false")
	if n := runtimes(); n != len(catalog)-1 {
		t.Errorf("after helm upgrade with runtimes.catalog.plain-ml.enabled=false: %d runtimes, want %d", n, len(catalog)-1)
	}

	helmRun("uninstall", chartRelease, "--namespace", ns)
	for _, kind := range []string{"clustertrainingruntimes", "clusterroles,clusterrolebindings", "validatingwebhookconfigurations,mutatingwebhookconfigurations"} {
		out := s.mustRun(t, nil, "get", kind, "-l", "app.kubernetes.io/instance="+chartRelease, "-o", "name")
		if strings.TrimSpace(out) != "" {
			t.Errorf("left after helm uninstall: %s", out)
		}
	}
	// The release namespace stays, as Helm, not the chart, created it.
	if out := s.mustRun(t, nil, "get", "namespace", ns, "-o", "jsonpath={.metadata.deletionTimestamp}"); strings.TrimSpace(out) != "" {
		t.Errorf("namespace %s is being deleted after helm uninstall; the chart did not create it", ns)
	}
	for _, crd := range crds {
		out := s.mustRun(t, nil, "get", "crd", crd, "-o", "jsonpath={.metadata.finalizers}")
		if strings.TrimSpace(out) != "" {
			t.Errorf("CRD %s after helm uninstall: finalizers %q, want none", crd, out)
		}
	}

	// namespace.create: the release in default, the manager in a namespace the
	// chart creates and owns. An upgrade with the defaults would move the
	// manager to default and delete that namespace: refused.
	const owned = "trainyard-owned"
	helmRun("install", chartRelease, chartDir, "--namespace", "default", "--set", "namespace.create=true,namespace.name="+owned)
	s.mustRun(t, nil, "get", "-n", owned, "deployment/trainyard-manager")
	if _, err := s.run(t, nil, helm, "upgrade", chartRelease, chartDir, "--namespace", "default", "--reset-values"); err == nil ||
		!strings.Contains(err.Error(), "created Namespace "+owned) || !strings.Contains(err.Error(), "namespace.name="+owned) {
		t.Errorf("helm upgrade with namespace.create=false over a release that created %s: error %v, want a refusal naming it", owned, err)
	}
	helmRun("upgrade", chartRelease, chartDir, "--namespace", "default", "--set", "namespace.create=true,namespace.name="+owned)
	helmRun("uninstall", chartRelease, "--namespace", "default")
	if out, err := s.run(t, nil, "", "get", "namespace", owned, "-o", "jsonpath={.metadata.deletionTimestamp}"); err == nil && strings.TrimSpace(out) == "" {
		t.Errorf("namespace %s, created by the chart, is not deleted by helm uninstall", owned)
	}

	// A TrainJob (admitted without webhooks now) goes with its CRD.
	job := []byte(`{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
 "metadata": {"name": "leftover", "namespace": "default"},
 "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}}}`)
	s.mustRun(t, job, "create", "-f", "-")
	if out := s.mustRun(t, nil, "get", "trainjob", "leftover", "-n", "default", "-o", "jsonpath={.metadata.finalizers}"); strings.TrimSpace(out) != "" {
		t.Errorf("TrainJob finalizers %q; Trainyard adds none", out)
	}
	s.mustRun(t, nil, "delete", "crd", "trainjobs.trainer.kubeflow.org", "--wait", "--timeout=60s")
	if out, err := s.run(t, nil, "", "get", "trainjobs", "-A", "-o", "name"); err == nil && strings.TrimSpace(out) != "" {
		t.Errorf("TrainJobs left after deleting their CRD: %s", out)
	}
}

func prefixAll(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}
