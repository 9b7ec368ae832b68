package pytorchjob

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/observe"
)

func TestLabelPatches(t *testing.T) {
	job := mnist(1)
	cases := map[string]struct {
		pods []corev1.Pod
		want []string
	}{
		"no pods": {},
		"pod with its batch Job's job-name": {
			pods: []corev1.Pod{pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodRunning)},
			want: []string{`mnist-master-0 {"metadata":{"labels":{"job-name":"mnist"}}}`},
		},
		"pod without job-name": {
			pods: []corev1.Pod{pod("mnist-worker-0", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodPending, func(p *corev1.Pod) {
				delete(p.Labels, LegacyJobNameLabel)
			})},
			want: []string{`mnist-worker-0 {"metadata":{"labels":{"job-name":"mnist"}}}`},
		},
		"pod already labelled": {
			pods: []corev1.Pod{pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodRunning, relabelled)},
		},
		"pod being deleted": {
			pods: []corev1.Pod{pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodRunning, deleting)},
		},
		"finished pods too, in order": {
			pods: []corev1.Pod{
				pod("mnist-master-0", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodSucceeded),
				pod("mnist-worker-0", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodRunning, relabelled),
				pod("mnist-worker-1", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodFailed),
			},
			want: []string{
				`mnist-master-0 {"metadata":{"labels":{"job-name":"mnist"}}}`,
				`mnist-worker-1 {"metadata":{"labels":{"job-name":"mnist"}}}`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var before []corev1.Pod
			for i := range tc.pods {
				before = append(before, *tc.pods[i].DeepCopy())
			}
			patches := labelPatches(job, tc.pods)
			var got []string
			for _, p := range patches {
				got = append(got, p.Object.GetName()+" "+string(p.Data))
				// The patch carries the pod's UID and namespace for the client.
				if p.Object.GetNamespace() != "ns" || p.Object.GetUID() == "" {
					t.Errorf("patched object %s/%s uid %q", p.Object.GetNamespace(), p.Object.GetName(), p.Object.GetUID())
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patches (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.pods); diff != "" {
				t.Errorf("labelPatches changed the observed pods (-before +after):\n%s", diff)
			}
		})
	}
}

func TestCleanUp(t *testing.T) {
	obs := observed(nil,
		[]*corev1.Service{serviceOf("mnist-master-0", false), serviceOf("mnist-worker-0", false), serviceOf("mnist-worker-1", true)},
		pod("a-pending", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodPending),
		pod("b-running", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodRunning),
		pod("c-succeeded", kubeflowv1.PyTorchJobReplicaTypeMaster, corev1.PodSucceeded),
		pod("d-failed", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodFailed),
		pod("e-unknown", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodUnknown),
		pod("f-deleting", kubeflowv1.PyTorchJobReplicaTypeWorker, corev1.PodRunning, deleting),
	)
	svcs := []string{"*v1.Service mnist-master-0", "*v1.Service mnist-worker-0"}
	cases := map[string]struct {
		policy kubeflowv1.CleanPodPolicy
		want   []string
	}{
		"None": {kubeflowv1.CleanPodPolicyNone, nil},
		"Running": {kubeflowv1.CleanPodPolicyRunning, append([]string{
			"*v1.Pod a-pending", "*v1.Pod b-running"}, svcs...)},
		"All": {kubeflowv1.CleanPodPolicyAll, append([]string{
			"*v1.Pod a-pending", "*v1.Pod b-running", "*v1.Pod c-succeeded", "*v1.Pod d-failed", "*v1.Pod e-unknown"}, svcs...)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job := Defaulted(mnist(1, cleanPodPolicy(tc.policy)))
			got := cleanUp(job, obs)
			if diff := cmp.Diff(tc.want, sortedNames(got)); diff != "" {
				t.Errorf("cleanUp (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServices(t *testing.T) {
	obs := observed(jobSet(), []*corev1.Service{serviceOf("b", false), serviceOf("a", false), serviceOf("gone", true)})
	obs.Children[childKey("ConfigMap", "c")] = &corev1.ConfigMap{}
	if diff := cmp.Diff([]string{"*v1.Service a", "*v1.Service b"}, sortedNames(services(obs))); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
	if got := services(&observe.Observed{}); got != nil {
		t.Errorf("services of nothing = %v", got)
	}
}

// fakeManager is the part of a manager SetupWithManager reads before it
// builds the controller; anything else panics (nil embedded Manager).
type fakeManager struct {
	ctrl.Manager
	mapper apimeta.RESTMapper
	client client.Client
}

func (m *fakeManager) GetRESTMapper() apimeta.RESTMapper { return m.mapper }
func (m *fakeManager) GetClient() client.Client          { return m.client }
func (m *fakeManager) GetScheme() *runtime.Scheme        { return m.client.Scheme() }

// lookupFails fails the lookup of the kinds it names, and finds the others.
type lookupFails struct {
	apimeta.RESTMapper
	kinds []string
}

var errLookup = errors.New("discovery failed")

func (l lookupFails) RESTMapping(gk schema.GroupKind, versions ...string) (*apimeta.RESTMapping, error) {
	for _, k := range l.kinds {
		if k == gk.Kind {
			return nil, errLookup
		}
	}
	return l.RESTMapper.RESTMapping(gk, versions...)
}

func TestSetupWithManager(t *testing.T) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := kubeflowv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	pytorchJobs := kubeflowv1.GroupVersion.WithKind(kubeflowv1.PyTorchJobKind)
	mapper := func(served ...schema.GroupVersionKind) apimeta.RESTMapper {
		m := apimeta.NewDefaultRESTMapper(nil)
		for _, gvk := range served {
			m.Add(gvk, apimeta.RESTScopeNamespace)
		}
		return m
	}
	cases := map[string]struct {
		mapper  apimeta.RESTMapper
		wantErr string
	}{
		"no PyTorchJob CRD: not started, no error": {mapper: mapper()},
		"looking the CRD up fails": {
			mapper:  lookupFails{RESTMapper: mapper(), kinds: []string{kubeflowv1.PyTorchJobKind}},
			wantErr: "looking up the PyTorchJob API",
		},
		// The generic setup's errors come back (it fails here before it
		// needs a real manager).
		"the generic setup fails": {
			mapper:  lookupFails{RESTMapper: mapper(pytorchJobs), kinds: []string{"Workload"}},
			wantErr: "discovery failed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			mgr := &fakeManager{mapper: tc.mapper, client: fake.NewClientBuilder().WithScheme(s).Build()}
			err := SetupWithManager(mgr, Options{})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("SetupWithManager: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("SetupWithManager error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
