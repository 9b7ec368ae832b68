package deployed_e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// leaseName is the manager's leader-election Lease (cmd/trainyard-manager).
const leaseName = "trainyard.trainer.kubeflow.org"

// TestManagerDeployment: the chart's Deployment runs the local image on the
// container nodes, every replica Ready, as user 65532, with the chart's
// arguments; one replica holds the lease.
func TestManagerDeployment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := installedDeployment(t, ctx)
	dep, err := cs.AppsV1().Deployments(managerNS).Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Status.ReadyReplicas != *want.Spec.Replicas || dep.Status.ReadyReplicas < 2 {
		t.Fatalf("Deployment %s: %d of %d replicas ready (the chart's default is 2)", dep.Name, dep.Status.ReadyReplicas, *want.Spec.Replicas)
	}
	pods := managerPods(t, ctx)
	wantC := want.Spec.Template.Spec.Containers[0]
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		got := p.Spec.Containers[0]
		if got.Image != managerImage || got.ImagePullPolicy != corev1.PullNever {
			t.Errorf("pod %s runs %s (%s), want %s, Never", p.Name, got.Image, got.ImagePullPolicy, managerImage)
		}
		if diff := cmp.Diff(wantC.Args, got.Args); diff != "" {
			t.Errorf("pod %s: arguments differ from the chart's (-chart +pod):\n%s", p.Name, diff)
		}
		uid, err := processUID(ctx, &p, "manager")
		if err != nil {
			t.Fatal(err)
		}
		if uid != 65532 {
			t.Errorf("pod %s: the manager runs as user %d, want 65532", p.Name, uid)
		}
		t.Logf("pod %s on %s: Ready, user %d, %d arguments", p.Name, p.Spec.NodeName, uid, len(got.Args))
	}
	lease, err := cs.CoordinationV1().Leases(managerNS).Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("leader-election Lease: %v", err)
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	held := false
	for _, n := range names {
		held = held || strings.HasPrefix(holder, n+"_")
	}
	if !held {
		t.Errorf("Lease %s is held by %q, not by one of the manager's pods %v", leaseName, holder, names)
	}
}

// TestWebhookThroughService: the API server calls the webhooks through the
// chart's Service (no URL), and they reject a bad TrainJob with its field path.
func TestWebhookThroughService(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, cfg := range vwc.Items {
		for _, w := range cfg.Webhooks {
			if !strings.Contains(w.Name, "trainer.kubeflow.org") {
				continue
			}
			n++
			if w.ClientConfig.URL != nil || w.ClientConfig.Service == nil || w.ClientConfig.Service.Namespace != managerNS {
				t.Errorf("webhook %s: client config %+v, want the Service in %s", w.Name, w.ClientConfig, managerNS)
			}
		}
	}
	if n == 0 {
		t.Fatal("no validating webhook of trainer.kubeflow.org registered")
	}
	// A name that starts with a digit is valid for the API server, but not
	// for the webhook (it becomes part of pod host names).
	job := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "1-bad", Namespace: "default"},
		Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}}}
	err = c.Client().Create(ctx, job)
	if err == nil {
		t.Fatal("TrainJob 1-bad was admitted")
	}
	for _, want := range []string{"denied the request", "metadata.name", "must start with a lowercase letter"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestMetricsOverHTTPS scrapes the manager's metrics Service from a pod, as
// Prometheus does: with the token of a ServiceAccount that the chart bound to
// trainyard-metrics-reader (metrics.readerServiceAccounts) it gets them,
// with the token of one that is not bound, 403.
func TestMetricsOverHTTPS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := buildImage(t, ctx, "scrape")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraperSA, Namespace: scraperNS}}
	if _, err := cs.CoreV1().ServiceAccounts(scraperNS).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().ServiceAccounts(scraperNS).Delete(context.Background(), scraperSA, metav1.DeleteOptions{})
	})
	url := "https://trainyard-manager-metrics." + managerNS + ".svc:8443/metrics"
	for _, tc := range []struct {
		pod, sa, want string
	}{
		{"scrape-reader", scraperSA, "status: 200\ngo_goroutines "},
		{"scrape-other", "default", "status: 403\n"},
	} {
		phase, logs := runPod(t, ctx, scraperNS, tc.pod, tc.sa, image, url, "go_goroutines ")
		if phase != corev1.PodSucceeded || !strings.HasPrefix(logs, tc.want) {
			t.Errorf("pod %s (ServiceAccount %s): %s, logs %q, want them to start with %q", tc.pod, tc.sa, phase, logs, tc.want)
		}
		t.Logf("pod %s: %s", tc.pod, strings.ReplaceAll(strings.TrimSpace(logs), "\n", "; "))
	}
}

// installedDeployment is the manager's Deployment as the release rendered it
// (helm get manifest).
func installedDeployment(t *testing.T, ctx context.Context) *appsv1.Deployment {
	t.Helper()
	out, err := helm(ctx, "get", "manifest", release, "--namespace", managerNS)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, doc := range strings.Split(out, "\n---") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind == "Deployment" && d.Name == "trainyard-manager" {
			return &d
		}
	}
	t.Fatal("the release has no Deployment trainyard-manager")
	return nil
}

// managerPods are the running pods of the manager's Deployment.
func managerPods(t *testing.T, ctx context.Context) []corev1.Pod {
	t.Helper()
	pods, err := cs.CoreV1().Pods(managerNS).List(ctx, metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=trainyard,app.kubernetes.io/component=manager", FieldSelector: "status.phase=Running"})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}
