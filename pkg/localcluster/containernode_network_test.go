package localcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const netprobeImage = "registry.trainyard.local/netprobe:1"

// checkPodNetwork checks the container nodes' network, DNS and storage with
// testdata/netprobe: a server pod on node 1, named as JobSet names its pods
// (host name train-node-0-0, subdomain train: a headless Service) and behind
// the ClusterIP Service web, is reached from the host through web's
// ClusterIP; a client pod on node 0, with a claim of the default
// StorageClass mounted, lists Services by in-cluster configuration (API
// server through default/kubernetes), reaches the server by pod IP (across
// nodes), by web's name and ClusterIP, resolves the server's JobSet-style
// host name through its search path and web's full name, and writes to its
// volume, which the test then finds in the volume's directory on the host.
// It returns the server's pod IP and web's ClusterIP.
func checkPodNetwork(ctx context.Context, t *testing.T, c *Cluster, dir string) (podIP, clusterIP string) {
	t.Helper()
	bin := filepath.Join(dir, "netprobe")
	if err := BuildStaticBinary(ctx, filepath.Join(c.o.RepoDir, "pkg", "localcluster"), "./testdata/netprobe", bin); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "netprobe.tar")
	if err := WriteImageArchive(archive, netprobeImage, []string{"/netprobe"}, ImageFile{Path: "/netprobe", Data: data, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < c.o.ContainerNodes; i++ {
		if err := ImportImage(ctx, c.ContainerNodeSocket(i), archive); err != nil {
			t.Fatal(err)
		}
	}

	const ns = "default"
	view := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}}}
	view.Name, view.Namespace = "default-view", ns
	labels := map[string]string{"app": "netprobe-server"}
	headless := &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, PublishNotReadyAddresses: true}}
	headless.Name, headless.Namespace = "train", ns
	web := &corev1.Service{Spec: corev1.ServiceSpec{Selector: labels,
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	web.Name, web.Namespace = "web", ns
	pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	pvc.Name, pvc.Namespace = "data", ns
	server := netprobePod("server", 1, "serve", "8080")
	server.Labels = labels
	server.Spec.Hostname, server.Spec.Subdomain = "train-node-0-0", "train"
	for _, o := range []client.Object{view, headless, web, pvc, server} {
		if err := c.client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.poll(ctx, "pod server to run", func() (bool, string, error) {
		err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "server"}, server)
		return err == nil && server.Status.Phase == corev1.PodRunning && server.Status.PodIP != "", fmt.Sprintf("%v %+v", err, server.Status), nil
	}); err != nil {
		t.Fatal(err)
	}
	podIP, clusterIP = server.Status.PodIP, web.Spec.ClusterIP
	if !strings.HasPrefix(podIP, "10.253.1.") {
		t.Errorf("server's pod IP %s, want one of node 1's 10.253.1.0/24", podIP)
	}
	const want = "served by train-node-0-0"

	// The host reaches a ClusterIP (as the API server reaches a webhook's Service).
	if err := c.poll(ctx, "web's ClusterIP from the host", func() (bool, string, error) {
		body, err := httpGet(ctx, "http://"+clusterIP+"/")
		return err == nil && strings.Contains(body, want), fmt.Sprintf("%q %v", body, err), nil
	}); err != nil {
		t.Error(err)
	}

	cl := netprobePod("client", 0, "kube",
		"get=http://"+podIP+":8080/@"+want,
		"get=http://web/@"+want,
		"get=http://"+clusterIP+"/@"+want,
		"resolve=train-node-0-0.train@"+podIP,
		"resolve=web.default.svc.cluster.local@"+clusterIP,
		"write=/data/probe/out.txt")
	cl.Spec.RestartPolicy = corev1.RestartPolicyNever
	cl.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	cl.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if err := c.client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	err = c.poll(ctx, "pod client to finish", func() (bool, string, error) {
		err := c.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "client"}, cl)
		done := err == nil && (cl.Status.Phase == corev1.PodSucceeded || cl.Status.Phase == corev1.PodFailed)
		return done, fmt.Sprintf("%v %+v", err, cl.Status), nil
	})
	logs, lerr := exec.CommandContext(ctx, filepath.Join(c.o.BinDir, "kubectl"), "--kubeconfig", c.Kubeconfig(), "logs", "-n", ns, "client").CombinedOutput()
	t.Logf("kubectl logs client (%v):\n%s", lerr, logs)
	if err != nil || cl.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("client pod: %v, phase %s", err, cl.Status.Phase)
	}
	if !strings.Contains(string(logs), "ok kube: default via https://10.0.0.1:443: services [kubernetes train web]") {
		t.Errorf("client's in-cluster Service list is not [kubernetes train web] through 10.0.0.1")
	}

	// The claim is bound to a volume of the provisioner, whose directory on
	// the host holds what the pod wrote.
	if err := c.client.Get(ctx, client.ObjectKeyFromObject(pvc), pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != StorageClassName {
		t.Fatalf("claim: phase %s, class %v; want Bound, %s", pvc.Status.Phase, pvc.Spec.StorageClassName, StorageClassName)
	}
	got, err := os.ReadFile(filepath.Join(c.VolumesDir(), pvc.Spec.VolumeName, "probe", "out.txt"))
	if err != nil || string(got) != "written by client\n" {
		t.Errorf("the volume's file on the host: %q, %v", got, err)
	}
	return podIP, clusterIP
}

func netprobePod(name string, node int, args ...string) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name, p.Namespace = name, "default"
	p.Spec = corev1.PodSpec{
		NodeName: ContainerNodeName(node),
		Containers: []corev1.Container{{Name: "netprobe", Image: netprobeImage, ImagePullPolicy: corev1.PullNever, Args: args,
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}},
		TerminationGracePeriodSeconds: ptr.To[int64](1),
	}
	return p
}

func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	// A new connection each time: one opened before kube-proxy wrote the
	// Service's rules went to whatever answers that address beyond the host
	// (on CI, an egress proxy answering with an empty body), and a kept-alive
	// connection would keep going there after the rules exist.
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}
