package controller

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func mpiJob(ns, name string, mutate func(*trainer.TrainJob)) *trainer.TrainJob {
	job := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "deepspeed-distributed"},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To[int32](3),
				Command:  []string{"mpirun", "python3", "/app/train.py"},
			},
		},
	}
	if mutate != nil {
		mutate(job)
	}
	return job
}

// An MPI TrainJob gets its hostfile and its SSH key Secret, owned by it; the
// Secret is made once: later passes leave it as it is.
func TestMPIChildren(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/deepspeed-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), mpiJob(ns, "ds", nil)))
	waitJobSet(t, ns, "ds")
	job := getTrainJob(t, ns, "ds")

	var cm corev1.ConfigMap
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "ds-mpi-hostfile"}, &cm))
	require.Equal(t, map[string]string{"hostfile": "ds-node-0-0.ds slots=1\nds-node-0-1.ds slots=1\nds-launcher-0-0.ds slots=1\n"}, cm.Data)
	var secret corev1.Secret
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "ds-mpi-ssh-auth"}, &secret))
	require.Equal(t, corev1.SecretTypeSSHAuth, secret.Type)
	require.True(t, ptr.Deref(secret.Immutable, false))
	require.True(t, strings.HasPrefix(string(secret.Data["ssh-privatekey"]), "-----BEGIN EC PRIVATE KEY-----\n"))
	require.True(t, strings.HasPrefix(string(secret.Data["ssh-publickey"]), "ecdsa-sha2-nistp521 "))
	wantOwner := []metav1.OwnerReference{{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: "ds", UID: job.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	for _, o := range []metav1.Object{&cm, &secret} {
		if diff := cmp.Diff(wantOwner, o.GetOwnerReferences()); diff != "" {
			t.Errorf("%s owner (-want +got):\n%s", o.GetName(), diff)
		}
	}

	// More passes (a label change reconciles the TrainJob) keep the keys.
	require.NoError(t, env.Client.Get(ctx(), client.ObjectKeyFromObject(job), job))
	job.Labels = map[string]string{"touched": "yes"}
	require.NoError(t, env.Client.Update(ctx(), job))
	consistently(t, 2*time.Second, func() error {
		var now corev1.Secret
		if err := env.Client.Get(ctx(), client.ObjectKeyFromObject(&secret), &now); err != nil {
			return err
		}
		if now.ResourceVersion != secret.ResourceVersion || string(now.Data["ssh-publickey"]) != string(secret.Data["ssh-publickey"]) {
			return fmt.Errorf("the SSH key Secret changed")
		}
		return nil
	})
}

// With webhooks off, the controller reports bad MPI input in status, with the
// field and upstream's message, and makes nothing.
func TestMPIBadInputIsReportedInStatus(t *testing.T) {
	ns := newNamespace(t)
	applyFile(t, ns, "runtimes/deepspeed-distributed.yaml")
	require.NoError(t, env.Client.Create(ctx(), &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "launcher-only"},
		Spec: trainer.TrainingRuntimeSpec{
			MLPolicy: &trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{MPI: &trainer.MPIMLPolicySource{RunLauncherAsNode: ptr.To(true)}}},
			Template: trainer.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
				{Name: "launcher", Template: batchJobTemplate(corev1.Container{Name: "node", Image: "example.com/mpi:v1"})},
			}}},
		},
	}))
	cases := map[string]struct {
		job  *trainer.TrainJob
		want string
	}{
		"reserved-env": {
			job: mpiJob(ns, "reserved-env", func(j *trainer.TrainJob) {
				j.Spec.Trainer.Env = []corev1.EnvVar{{Name: "OMPI_MCA_plm_rsh_args", Value: "-v"}}
			}),
			want: "spec.trainer.env: Invalid value",
		},
		"no-node-job": {
			job: mpiJob(ns, "no-node-job", func(j *trainer.TrainJob) {
				j.Spec.RuntimeRef = trainer.RuntimeRef{Name: "launcher-only", Kind: ptr.To(trainer.TrainingRuntimeKind)}
			}),
			want: "spec.trainer.numNodes: Invalid value: 3: must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node",
		},
	}
	for name, tc := range cases {
		require.NoError(t, env.Client.Create(ctx(), tc.job), name)
	}
	for name, tc := range cases {
		job := waitCondition(t, ns, name, trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobBuildFailedReason)
		require.Contains(t, findCond(job, trainer.TrainJobCreated).Message, tc.want)
		if name == "reserved-env" {
			require.Contains(t, findCond(job, trainer.TrainJobCreated).Message, "must not have reserved envs, invalid envs configured: [OMPI_MCA_plm_rsh_args]")
		}
	}
	consistently(t, time.Second, func() error {
		for name := range cases {
			for _, o := range []client.Object{&jobsetv1alpha2.JobSet{}, &corev1.Secret{}} {
				key := client.ObjectKey{Namespace: ns, Name: name}
				if _, ok := o.(*corev1.Secret); ok {
					key.Name += "-mpi-ssh-auth"
				}
				if err := env.Client.Get(ctx(), key, o); !apierrors.IsNotFound(err) {
					return fmt.Errorf("TrainJob %s got %s (err=%v)", name, key.Name, err)
				}
			}
		}
		return nil
	})
}
