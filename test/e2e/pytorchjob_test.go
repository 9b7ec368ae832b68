package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

// v1 is a client that also knows kubeflow.org/v1.
func v1Client(t *testing.T) client.Client {
	t.Helper()
	s := localcluster.Scheme()
	utilruntime.Must(kubeflowv1.AddToScheme(s))
	cl, err := client.New(c.RESTConfig(), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func loadPyTorchJob(t *testing.T, rel, ns string) *kubeflowv1.PyTorchJob {
	t.Helper()
	data, err := os.ReadFile(repoFile(rel))
	if err != nil {
		t.Fatal(err)
	}
	var job kubeflowv1.PyTorchJob
	if err := yaml.UnmarshalStrict(data, &job); err != nil {
		t.Fatalf("decoding %s: %v", rel, err)
	}
	job.Namespace = ns
	return &job
}

// waitV1 waits for a v1 condition of this type to be True.
func waitV1(t *testing.T, cl client.Client, ns, name string, cond kubeflowv1.JobConditionType, timeout time.Duration) *kubeflowv1.PyTorchJob {
	t.Helper()
	var job kubeflowv1.PyTorchJob
	waitFor(t, timeout, func() error {
		if err := cl.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return err
		}
		for _, c := range job.Status.Conditions {
			if c.Type == cond && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("PyTorchJob %s: no %s condition yet: %+v", name, cond, job.Status.Conditions)
	})
	return &job
}

func podsBy(t *testing.T, ns string, labels map[string]string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := cli.List(ctx(), &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// The Kubeflow mnist manifests (nccl, and the gloo variant) apply unchanged and
// succeed; v1's label selectors list exactly each job's pods.
func TestPyTorchJobMnistManifestsUnchanged(t *testing.T) {
	cl := v1Client(t)
	ns := newNamespace(t)
	names := []string{"pytorch-dist-mnist-nccl", "pytorch-dist-mnist-gloo"}
	selectors := func(name string) []map[string]string {
		return []map[string]string{{"training.kubeflow.org/job-name": name}, {"job-name": name}, {"pytorch_job_name": name}}
	}
	// What each selector lists, seen while the jobs run: the master's and the
	// worker's pods must both show up (a finished master ends the JobSet, which
	// stops a still-running worker, so look while they run).
	seen := map[string]map[string]bool{}
	for _, f := range []string{"examples/pytorchjob/pytorch_job_mnist_nccl.yaml", "examples/pytorchjob/pytorch_job_mnist_gloo.yaml"} {
		if err := cl.Create(ctx(), loadPyTorchJob(t, f, ns)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	waitFor(t, long, func() error {
		for _, name := range names {
			for _, sel := range selectors(name) {
				key := fmt.Sprint(sel)
				if seen[key] == nil {
					seen[key] = map[string]bool{}
				}
				for _, p := range podsBy(t, ns, sel) {
					switch {
					case strings.HasPrefix(p.Name, name+"-master-"):
						seen[key]["master"] = true
					case strings.HasPrefix(p.Name, name+"-worker-"):
						seen[key]["worker"] = true
					default:
						t.Fatalf("-l %v lists pod %s of another job", sel, p.Name)
					}
				}
				if !seen[key]["master"] || !seen[key]["worker"] {
					return fmt.Errorf("-l %v has listed %v so far, want the master and the worker", sel, seen[key])
				}
			}
		}
		return nil
	})
	for _, name := range names {
		job := waitV1(t, cl, ns, name, kubeflowv1.JobSucceeded, long)
		if job.Status.CompletionTime == nil {
			t.Errorf("%s: no completionTime", name)
		}
		for _, svc := range []string{name + "-master-0", name + "-worker-0"} {
			var s corev1.Service
			if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: svc}, &s); err != nil {
				t.Errorf("Service %s: %v", svc, err)
			} else if s.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("Service %s is not headless", svc)
			}
		}
	}
}

// A Master + 2 Workers CPU job with a PVC-backed volume on the master completes.
func TestPyTorchJobWithPVC(t *testing.T) {
	cl := v1Client(t)
	ns := newNamespace(t)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: "data"},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	for _, o := range []client.Object{pv, pvc} {
		if err := cli.Create(ctx(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = cli.Delete(ctx(), pv) })

	container := corev1.Container{Name: "pytorch", Image: "example.com/mnist:cpu", Args: []string{"--backend", "gloo"}}
	master := container.DeepCopy()
	master.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	job := &kubeflowv1.PyTorchJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mw2"},
		Spec: kubeflowv1.PyTorchJobSpec{PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			// The master ends last, as a real training's does: its success
			// completes the JobSet, which stops workers still running (and
			// their pods would then be missing from the count below).
			kubeflowv1.PyTorchJobReplicaTypeMaster: {Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: runningFor(10 * time.Second)},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{*master},
					Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
				}}},
			kubeflowv1.PyTorchJobReplicaTypeWorker: {Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{container},
			}}},
		}},
	}
	if err := cl.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	waitV1(t, cl, ns, "mw2", kubeflowv1.JobRunning, long)
	done := waitV1(t, cl, ns, "mw2", kubeflowv1.JobSucceeded, long)
	if got := len(podsBy(t, ns, map[string]string{"training.kubeflow.org/job-name": "mw2"})); got != 3 {
		t.Errorf("want 3 pods (master + 2 workers), got %d", got)
	}
	if rs := done.Status.ReplicaStatuses[kubeflowv1.PyTorchJobReplicaTypeMaster]; rs == nil || rs.Succeeded != 1 {
		t.Errorf("master replica status %+v", rs)
	}
	var bound corev1.PersistentVolumeClaim
	if err := cli.Get(ctx(), client.ObjectKeyFromObject(pvc), &bound); err != nil || bound.Status.Phase != corev1.ClaimBound {
		t.Errorf("PVC not bound: %v %v", bound.Status.Phase, err)
	}
}

// ExitCode restart policy: a worker exiting with 1–127 fails the job at once; one
// exiting with 128–255 is retried (a new pod), as in v1.
func TestPyTorchJobExitCodes(t *testing.T) {
	cl := v1Client(t)
	ns := newNamespace(t)
	mk := func(name, exitCode string) *kubeflowv1.PyTorchJob {
		worker := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{failLabel: "true"},
				Annotations: map[string]string{"pod-container-running-failed.stage.kwok.x-k8s.io/exit-code": exitCode},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "example.com/mnist:cpu"}}},
		}
		masterTmpl := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: runningFor(2 * time.Minute)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pytorch", Image: "example.com/mnist:cpu"}}},
		}
		return &kubeflowv1.PyTorchJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kubeflowv1.PyTorchJobSpec{
				RunPolicy: kubeflowv1.RunPolicy{BackoffLimit: ptr.To[int32](3)},
				PyTorchReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
					kubeflowv1.PyTorchJobReplicaTypeMaster: {Replicas: ptr.To[int32](1), Template: masterTmpl},
					kubeflowv1.PyTorchJobReplicaTypeWorker: {Replicas: ptr.To[int32](1), RestartPolicy: kubeflowv1.RestartPolicyExitCode, Template: worker},
				},
			},
		}
	}
	if err := cl.Create(ctx(), mk("permanent", "1")); err != nil {
		t.Fatal(err)
	}
	failed := waitV1(t, cl, ns, "permanent", kubeflowv1.JobFailed, long)
	if n := len(podsBy(t, ns, map[string]string{"training.kubeflow.org/job-name": "permanent", "training.kubeflow.org/replica-type": "worker"})); n != 1 {
		t.Errorf("exit code 1 is permanent: want 1 worker pod, got %d", n)
	}
	t.Logf("exit code 1: %s", lastMessage(failed))

	if err := cl.Create(ctx(), mk("retryable", "137")); err != nil {
		t.Fatal(err)
	}
	workerPods := map[string]string{"training.kubeflow.org/job-name": "retryable", "training.kubeflow.org/replica-type": "worker"}
	seen := map[string]bool{}
	waitFor(t, long, func() error {
		for _, p := range podsBy(t, ns, workerPods) {
			seen[string(p.UID)] = true
		}
		if len(seen) < 2 {
			return fmt.Errorf("exit code 137 is retryable: want a replacement worker pod, saw %d", len(seen))
		}
		return nil
	})
	if c := waitV1(t, cl, ns, "retryable", kubeflowv1.JobRunning, short); hasCond(c, kubeflowv1.JobFailed) {
		t.Errorf("a retryable exit code failed the job: %s", lastMessage(c))
	}
}

func hasCond(job *kubeflowv1.PyTorchJob, t kubeflowv1.JobConditionType) bool {
	for _, c := range job.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func lastMessage(job *kubeflowv1.PyTorchJob) string {
	if n := len(job.Status.Conditions); n > 0 {
		return job.Status.Conditions[n-1].Message
	}
	return ""
}

// runPolicy.suspend stops a PyTorchJob (no pods) and resuming runs it to success;
// ttlSecondsAfterFinished then deletes it.
func TestPyTorchJobSuspendResumeTTL(t *testing.T) {
	cl := v1Client(t)
	ns := newNamespace(t)
	job := loadPyTorchJob(t, "examples/pytorchjob/pytorch_job_mnist_gloo.yaml", ns)
	job.Spec.RunPolicy.Suspend = ptr.To(true)
	job.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](3)
	if err := cl.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	waitV1(t, cl, ns, job.Name, kubeflowv1.JobSuspended, short)
	time.Sleep(3 * time.Second)
	if n := len(podsBy(t, ns, map[string]string{"training.kubeflow.org/job-name": job.Name})); n != 0 {
		t.Fatalf("a suspended PyTorchJob has %d pods", n)
	}
	waitFor(t, short, func() error {
		var cur kubeflowv1.PyTorchJob
		if err := cl.Get(ctx(), client.ObjectKeyFromObject(job), &cur); err != nil {
			return err
		}
		cur.Spec.RunPolicy.Suspend = ptr.To(false)
		return cl.Update(ctx(), &cur)
	})
	waitV1(t, cl, ns, job.Name, kubeflowv1.JobSucceeded, long)
	waitFor(t, short, func() error {
		if err := cl.Get(ctx(), client.ObjectKeyFromObject(job), &kubeflowv1.PyTorchJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("PyTorchJob not deleted after its TTL (%v)", err)
		}
		return nil
	})
}

// Kueue's built-in kubeflow.org/pytorchjob integration queues a PyTorchJob with
// no extra setup: it waits suspended, is admitted as a whole, and its pods land on
// the admitted flavor's nodes.
func TestKueueQueuesPyTorchJob(t *testing.T) {
	cl := v1Client(t)
	if err := c.ApplyFile(ctx(), repoFile("examples/kueue/queues.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartKueue(ctx(), []string{"batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob", "kubeflow.org/pytorchjob"}); err != nil {
		t.Fatal(err)
	}
	job := loadPyTorchJob(t, "examples/pytorchjob/pytorch_job_mnist_gloo.yaml", queueNS)
	job.Name = "queued-mnist"
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "gpu-queue"}
	// The master ends last, as a real training's does: its success completes
	// the JobSet, which stops a worker still running (its pod would then be
	// missing from the count below; kwok's completion times are random).
	master := job.Spec.PyTorchReplicaSpecs[kubeflowv1.PyTorchJobReplicaTypeMaster]
	if master.Template.Annotations == nil {
		master.Template.Annotations = map[string]string{}
	}
	for k, v := range runningFor(10 * time.Second) {
		master.Template.Annotations[k] = v
	}
	if err := cl.Create(ctx(), job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Delete(ctx(), job, client.PropagationPolicy("Background")) })
	waitV1(t, cl, queueNS, job.Name, kubeflowv1.JobSucceeded, long)
	ps := podsBy(t, queueNS, map[string]string{"training.kubeflow.org/job-name": job.Name})
	if len(ps) != 2 {
		t.Fatalf("want 2 pods, got %d", len(ps))
	}
	for _, p := range ps {
		if p.Spec.NodeSelector[localcluster.PoolLabel] != "gpu" {
			t.Errorf("pod %s: nodeSelector %v, want Kueue's gpu flavor", p.Name, p.Spec.NodeSelector)
		}
	}
}
