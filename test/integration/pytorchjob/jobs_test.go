package pytorchjob

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// No Job controller runs here, but the API server validates Jobs: every Job
// JobSet would create from a rendered JobSet (the ExitCode pod failure policy,
// the elastic success policy, the backoff limits) passes, and a template
// carrying job-name=<PyTorchJob> (which is why the controller relabels pods
// instead) does not.
func TestJobsPassAPIValidation(t *testing.T) {
	ns := newNamespace(t)
	require.NoError(t, c.Create(ctx(), mnistJob(ns, "exitcode", func(j *kubeflowv1.PyTorchJob) {
		j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](3)
		j.Spec.PyTorchReplicaSpecs["Worker"].RestartPolicy = kubeflowv1.RestartPolicyExitCode
		j.Spec.PyTorchReplicaSpecs["Worker"].Replicas = ptr.To[int32](2)
		j.Spec.PyTorchReplicaSpecs["Master"].RestartPolicy = kubeflowv1.RestartPolicyNever
	})))
	applyExample(t, ns, "examples/pytorchjob/pytorch_job_elastic.yaml")

	jobFor := func(jsName, rjob string, tmpl batchv1.JobTemplateSpec) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%s-0", jsName, rjob), Labels: tmpl.Labels},
			Spec:       *tmpl.Spec.DeepCopy(),
		}
	}
	for _, name := range []string{"exitcode", "pytorch-elastic"} {
		js := waitJobSet(t, ns, name)
		for _, rj := range js.Spec.ReplicatedJobs {
			require.NoError(t, c.Create(ctx(), jobFor(js.Name, rj.Name, rj.Template), client.DryRunAll), "Job of %s/%s", name, rj.Name)
		}
	}

	js := waitJobSet(t, ns, "exitcode")
	bad := jobFor(js.Name, "master", replicatedJob(t, js, "master").Template)
	bad.Spec.Template.Labels["job-name"] = "exitcode"
	err := c.Create(ctx(), bad, client.DryRunAll)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "job-name"), err.Error())
}
