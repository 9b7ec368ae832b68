package testkind

import (
	"errors"
	"flag"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/controller/jobframework"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	jobsetplugin "github.com/trainyard/trainyard/pkg/runtime/plugins/jobset"
)

// TestKind is the test kind (jobframework.Kind), with a flag of its own.
type TestKind struct {
	concurrency int
	fw          *framework.Framework
}

var _ jobframework.Kind = (*TestKind)(nil)

// New returns the kind; its pipeline is Trainyard's JobSet plugin alone.
func New() *TestKind {
	fw, err := framework.New(jobsetplugin.New())
	if err != nil {
		panic(err) // one plugin, no options: cannot fail
	}
	return &TestKind{concurrency: 2, fw: fw}
}

// Name implements jobframework.Kind.
func (*TestKind) Name() string { return "testjob" }

// AddToScheme implements jobframework.Kind.
func (*TestKind) AddToScheme(s *k8sruntime.Scheme) error { return AddToScheme(s) }

// BindFlags implements jobframework.Kind.
func (k *TestKind) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&k.concurrency, "testjob-concurrency", k.concurrency, "TestJobs reconciled in parallel")
}

// Validate implements jobframework.Kind: any concurrency will do.
func (*TestKind) Validate() error { return nil }

// Enabled implements jobframework.Kind.
func (*TestKind) Enabled() bool { return true }

// Owned implements jobframework.Kind.
func (k *TestKind) Owned() []client.Object { return k.fw.Owns() }

// SetupWithManager implements jobframework.Kind.
func (k *TestKind) SetupWithManager(m *jobframework.Manager) error {
	_, err := jobframework.SetupWithManager(m, jobframework.Config{
		Options: jobframework.Options{MaxConcurrentReconciles: k.concurrency},
		Adapter: adapter{fw: k.fw},
		Owns:    k.fw.Owns(),
		Name:    k.Name(),
	})
	return err
}

// SetupWebhooks implements jobframework.Kind: the kind has none.
func (*TestKind) SetupWebhooks(*jobframework.Manager) error { return nil }

// adapter is the kind's jobframework.Adapter.
type adapter struct{ fw *framework.Framework }

func (adapter) Kind() string            { return Kind }
func (adapter) New() client.Object      { return &TestJob{} }
func (adapter) Ours(client.Object) bool { return true }

func finished(s *TestJobStatus) bool { return s.Phase == "Complete" || s.Phase == "Failed" }

// runtimeOf is the job's runtime: one replicated job labelled as the
// trainer, whose pods run the image and never restart.
func runtimeOf(j *TestJob) *runtime.Runtime {
	rt := &runtime.Runtime{Kind: Kind, Name: j.Name}
	rt.Spec.Template.Spec.ReplicatedJobs = []jobsetv1alpha2.ReplicatedJob{{
		Name: "node",
		Template: batchv1.JobTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.AncestorLabel: trainer.AncestorTrainer}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: trainer.NodeContainer, Image: j.Spec.Image}},
			}}},
		},
	}}
	return rt
}

// Plan runs the JobSet plugin on a runtime made from the TestJob: one
// trainer job of Spec.Nodes pods.
func (a adapter) Plan(o client.Object, _ *observe.Observed, _ time.Time) (*plan.Plan, error) {
	j := o.(*TestJob)
	if finished(&j.Status) {
		return nil, nil
	}
	req := &runtime.Request{
		Name: j.Name, Namespace: j.Namespace, Suspend: j.Spec.Suspend,
		Trainer: &trainer.Trainer{NumNodes: ptr.To(j.Spec.Nodes)},
		Paths:   runtime.Paths{Name: field.NewPath("metadata", "name"), Trainer: field.NewPath("spec"), Spec: field.NewPath("spec")},
	}
	return a.fw.Build(req, runtimeOf(j))
}

// Status follows the JobSet: its name, and a phase from its suspension and
// how it finished (what the pipeline's status plugins read of it).
func (a adapter) Status(o client.Object, obs *observe.Observed, sync jobframework.Sync, _ time.Time) jobframework.Outcome {
	j := o.(*TestJob)
	u := j.DeepCopy()
	after := sync.After(obs)
	js := after.JobSet(j.Name)
	u.Status.Message = ""
	switch {
	case sync.Err != nil:
		var invalid *framework.InvalidError
		u.Status.Phase, u.Status.Message = "Pending", sync.Err.Error()
		if !errors.As(sync.Err, &invalid) {
			u.Status.Message = "retrying: " + sync.Err.Error()
		}
	case js == nil:
		u.Status.Phase = "Pending"
	default:
		u.Status.JobSet = js.Name
		u.Status.Phase = "Running"
		if ptr.Deref(js.Spec.Suspend, false) {
			u.Status.Phase = "Suspended"
		}
		if f := a.fw.Status(j.Name, after).Finished; f != nil {
			u.Status.Phase = "Complete"
			if f.Failed {
				u.Status.Phase = "Failed"
			}
		}
	}
	if finished(&j.Status) {
		u.Status = j.Status // a finished job stays finished
	}
	return jobframework.Outcome{Job: u}
}
