package e2e

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
)

// asUser is a client of the local cluster that impersonates user (in the
// system:authenticated group, as a real user is).
func asUser(t *testing.T, user string) client.Client {
	t.Helper()
	rc := c.RESTConfig()
	rc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	uc, err := client.New(rc, client.Options{Scheme: localcluster.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return uc
}

// TestNamespaceEditorRunsTrainJobs: the local cluster installs the users'
// roles a real install has, so a user bound to Kubernetes' `edit` in a
// namespace may run TrainJobs there and read the runtime catalog (with the
// Fashion-MNIST runtime of `make run`), and may not change the catalog; a
// user without the binding may not create TrainJobs.
func TestNamespaceEditorRunsTrainJobs(t *testing.T) {
	ns := newNamespace(t)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}
	if err := cli.Create(ctx(), rb); err != nil {
		t.Fatal(err)
	}
	alice, bob := asUser(t, "alice"), asUser(t, "bob")

	var rts trainer.ClusterTrainingRuntimeList
	if err := alice.List(ctx(), &rts); err != nil {
		t.Fatalf("alice lists the ClusterTrainingRuntimes: %v", err)
	}
	names := map[string]bool{}
	for _, rt := range rts.Items {
		names[rt.Name] = true
	}
	for _, want := range []string{"torch-distributed", "torch-distributed-fashion-mnist"} {
		if !names[want] {
			t.Errorf("runtime %s not installed by the local cluster; alice sees %v", want, names)
		}
	}

	// RBAC aggregation is asynchronous (kube-controller-manager): retry until
	// `edit` has the rules.
	job := loadTrainJob(t, "examples/trainjob-torch.yaml", ns, "by-alice")
	waitFor(t, short, func() error { return alice.Create(ctx(), job.DeepCopy()) })
	if err := alice.Delete(ctx(), job); err != nil {
		t.Errorf("alice deletes her TrainJob: %v", err)
	}

	if err := bob.Create(ctx(), loadTrainJob(t, "examples/trainjob-torch.yaml", ns, "by-bob")); !apierrors.IsForbidden(err) {
		t.Errorf("bob, with no role in %s, creates a TrainJob: %v (want Forbidden)", ns, err)
	}
	rt := rts.Items[0].DeepCopy()
	rt.ObjectMeta = metav1.ObjectMeta{Name: "by-alice"}
	if err := alice.Create(ctx(), rt); !apierrors.IsForbidden(err) {
		t.Errorf("alice creates a ClusterTrainingRuntime: %v (want Forbidden)", err)
	}
}
