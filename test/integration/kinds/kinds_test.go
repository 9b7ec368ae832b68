// Package kinds tests job-kind registration on a real kube-apiserver and
// etcd: a test-only kind (testkind) that is one package plus one line
// reconciles to a JobSet, and a disabled kind registers nothing.
package kinds

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/controller/mpijob"
	"github.com/trainyard/trainyard/pkg/controller/pytorchjob"
	"github.com/trainyard/trainyard/pkg/controller/xgboostjob"
	"github.com/trainyard/trainyard/test/integration/framework"
	"github.com/trainyard/trainyard/test/integration/kinds/testkind"
)

var env *framework.Env

func TestMain(m *testing.M) {
	crd := filepath.Join(framework.RepoRoot(), "test", "integration", "kinds", "testkind", "crd.yaml")
	framework.Main(m, &env, framework.Options{Webhooks: true, CRDPaths: []string{crd}}, nil)
}

func ctx() context.Context { return context.Background() }

// start runs the manager with Trainyard's kinds, changed by change, and the
// test-only kind: the one line that adds a kind.
func start(t *testing.T, change func([]jobframework.Kind)) {
	t.Helper()
	require.NoError(t, env.StartManager(framework.ManagerOptions{
		Kinds:      change,
		ExtraKinds: []jobframework.Kind{testkind.New()},
	}))
	t.Cleanup(env.StopManager)
}

// A kind that is one package (testkind) plus one line reconciles to a
// JobSet owned by the job, and its status follows the JobSet.
func TestTestKindRunsAsJobSet(t *testing.T) {
	start(t, nil)
	ns := framework.NewNamespace(t, env.Client, "kind")
	job := &testkind.TestJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tj"},
		Spec:       testkind.TestJobSpec{Image: "example.com/run:v1", Nodes: 3},
	}
	require.NoError(t, env.Client.Create(ctx(), job))

	var js jobsetv1alpha2.JobSet
	framework.Eventually(t, func() error { return env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "tj"}, &js) })
	owner := metav1.GetControllerOf(&js)
	require.NotNil(t, owner, "the JobSet has no controller owner")
	require.Equal(t, []string{testkind.GroupVersion.String(), testkind.Kind, "tj"}, []string{owner.APIVersion, owner.Kind, owner.Name})
	require.Len(t, js.Spec.ReplicatedJobs, 1)
	require.Equal(t, int32(3), ptr.Deref(js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism, 0))
	require.Equal(t, "example.com/run:v1", js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image)

	waitPhase(t, ns, "tj", "Running")
	// No JobSet controller runs here: complete the JobSet by hand.
	js.Status.Conditions = []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
		Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: metav1.Now()}}
	require.NoError(t, env.Client.Status().Update(ctx(), &js))
	got := waitPhase(t, ns, "tj", "Complete")
	require.Equal(t, "tj", got.Status.JobSet)
}

func waitPhase(t *testing.T, ns, name, phase string) *testkind.TestJob {
	t.Helper()
	var j testkind.TestJob
	framework.Eventually(t, func() error {
		if err := env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: name}, &j); err != nil {
			return err
		}
		if j.Status.Phase != phase {
			return fmt.Errorf("phase %q (%s), want %s", j.Status.Phase, j.Status.Message, phase)
		}
		return nil
	})
	return &j
}

// --enable-<kind>=false registers nothing of the kubeflow.org/v1 kinds
// (PyTorchJob, MPIJob, XGBoostJob): no webhook on the manager's server, no
// metric in its registry, and no watch of their jobs on the API server (a
// controller would open one), while the same manager with the kinds enabled
// has all three.
func TestDisabledKindRegistersNothing(t *testing.T) {
	v1kinds := []struct {
		name, resource string
		register       func() error
	}{
		{"pytorchjob", "pytorchjobs", func() error { return pytorchjob.NewMetrics().Register(env.Metrics) }},
		{"mpijob", "mpijobs", func() error { return mpijob.Def.NewMetrics().Register(env.Metrics) }},
		{"xgboostjob", "xgboostjobs", func() error { return xgboostjob.Def.NewMetrics().Register(env.Metrics) }},
	}
	cases := []struct {
		name    string
		enabled bool
	}{{"enabled", true}, {"--enable-<kind>=false", false}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := baseline(t)
			start(t, func(kinds []jobframework.Kind) {
				for _, k := range kinds {
					for _, v := range v1kinds {
						if k.Name() == v.name {
							require.NoError(t, newFlagSet(k).Parse([]string{"--enable-" + v.name + "=" + strconv.FormatBool(tc.enabled)}))
						}
					}
				}
			})
			for _, v := range v1kinds {
				for _, path := range []string{"/mutate-kubeflow-org-v1-" + v.name, "/validate-kubeflow-org-v1-" + v.name} {
					require.Equal(t, tc.enabled, served(path), "webhook %s served", path)
				}
				// The kind's metrics are in the manager's registry iff it
				// registered them: registering them again fails then.
				err := v.register()
				require.Equal(t, tc.enabled, err != nil, "%s metrics registered: %v", v.name, err)
			}
			require.True(t, served("/validate-trainer-kubeflow-org-v1alpha1-trainjob"), "the TrainJob webhook is served")

			// Once TrainJobs are watched, the manager has started its
			// controllers; the v1 kinds' jobs are watched only by enabled kinds.
			framework.Eventually(t, func() error {
				if n := watches(t, "trainjobs"); n <= base["trainjobs"] {
					return fmt.Errorf("no watch of trainjobs yet")
				}
				for _, v := range v1kinds {
					if n := watches(t, v.resource); tc.enabled && n <= base[v.resource] {
						return fmt.Errorf("no watch of %s yet", v.resource)
					}
				}
				return nil
			})
			if !tc.enabled {
				framework.Consistently(t, 2*time.Second, func() error {
					for _, v := range v1kinds {
						if n := watches(t, v.resource); n != base[v.resource] {
							return fmt.Errorf("%d watches of %s with the kind disabled, %d without a manager", n, v.resource, base[v.resource])
						}
					}
					return nil
				})
			}
		})
	}
}

// served reports whether the running manager's webhook server has a handler
// for path.
func served(path string) bool {
	req := httptest.NewRequest(http.MethodPost, path, nil)
	_, pattern := env.Manager.GetWebhookServer().WebhookMux().Handler(req)
	return pattern == path
}

// baseline is how many watches of TrainJobs and the v1 kinds the API server
// serves without a manager: the garbage collector's (it watches every
// resource), once those of an earlier manager are gone (the count holds
// still for a second).
func baseline(t *testing.T) map[string]int {
	t.Helper()
	count := func() map[string]int {
		out := map[string]int{}
		for _, r := range []string{"trainjobs", "pytorchjobs", "mpijobs", "xgboostjobs"} {
			out[r] = watches(t, r)
		}
		return out
	}
	var base map[string]int
	framework.Eventually(t, func() error {
		before := count()
		time.Sleep(time.Second)
		base = count()
		for r, n := range base {
			if n == 0 {
				return fmt.Errorf("the garbage collector does not watch %s yet: %v", r, base)
			}
		}
		if fmt.Sprint(before) != fmt.Sprint(base) {
			return fmt.Errorf("watches still changing: %v, then %v", before, base)
		}
		return nil
	})
	return base
}

// watches is how many WATCH requests on a resource the API server serves now
// (its apiserver_longrunning_requests gauge).
func watches(t *testing.T, resource string) int {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx())
	require.NoError(t, err)
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || !strings.Contains(line, `verb="WATCH"`) ||
			!strings.Contains(line, `resource="`+resource+`"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		require.NoError(t, err)
		n += int(v)
	}
	return n
}

// newFlagSet binds a kind's flags, as the manager's command line does.
func newFlagSet(k jobframework.Kind) *flag.FlagSet {
	fs := flag.NewFlagSet(k.Name(), flag.ContinueOnError)
	k.BindFlags(fs)
	return fs
}
