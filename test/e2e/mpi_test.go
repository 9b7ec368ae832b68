package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// Upstream's MPI runtimes (deepspeed-distributed, mlx-distributed), applied
// unchanged, run a TrainJob: the JobSet, the SSH key Secret and the hostfile
// ConfigMap are rendered as Kubeflow Trainer renders them, the launcher starts
// once the node pods are Ready, and the TrainJob is Complete when the launcher
// is, while the node pods (sshd) still run.
func TestMPIRuntimes(t *testing.T) {
	for _, tc := range []struct {
		runtime  string
		numNodes *int32
		hosts    []string
	}{
		{"deepspeed-distributed", ptr.To[int32](3), []string{"ds-node-0-0.ds", "ds-node-0-1.ds", "ds-launcher-0-0.ds"}},
		{"mlx-distributed", nil, []string{"ds-node-0-0.ds", "ds-launcher-0-0.ds"}},
	} {
		t.Run(tc.runtime, func(t *testing.T) {
			ns := newNamespace(t)
			job := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ds"},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: trainer.RuntimeRef{Name: tc.runtime},
					Trainer: &trainer.Trainer{
						NumNodes: tc.numNodes,
						Command:  []string{"mpirun", "python3", "/workspace/train.py"},
						Env:      []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}},
					},
				},
			}
			// The node pods would run sshd until the JobSet ends.
			job = withPods(job, nil, runningFor(10*time.Minute))
			job.Spec.PodTemplateOverrides[0].TargetJobs = []trainer.PodTemplateOverrideTargetJob{{Name: "node"}}
			if err := cli.Create(ctx(), job); err != nil {
				t.Fatal(err)
			}

			var cm corev1.ConfigMap
			var secret corev1.Secret
			waitFor(t, short, func() error {
				if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "ds-mpi-hostfile"}, &cm); err != nil {
					return err
				}
				return cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: "ds-mpi-ssh-auth"}, &secret)
			})
			var want strings.Builder
			for _, h := range tc.hosts {
				fmt.Fprintf(&want, "%s slots=1\n", h)
			}
			if diff := cmp.Diff(map[string]string{"hostfile": want.String()}, cm.Data); diff != "" {
				t.Errorf("hostfile (-want +got):\n%s", diff)
			}
			if secret.Type != corev1.SecretTypeSSHAuth || !ptr.Deref(secret.Immutable, false) {
				t.Errorf("Secret type %s immutable %v, want kubernetes.io/ssh-auth, immutable", secret.Type, secret.Immutable)
			}
			if !strings.HasPrefix(string(secret.Data["ssh-privatekey"]), "-----BEGIN EC PRIVATE KEY-----\n") {
				t.Errorf("ssh-privatekey is no PEM EC key")
			}
			if f := strings.Fields(string(secret.Data["ssh-publickey"])); len(f) != 2 || f[0] != "ecdsa-sha2-nistp521" {
				t.Errorf("ssh-publickey %q", secret.Data["ssh-publickey"])
			} else if _, err := base64.StdEncoding.DecodeString(f[1]); err != nil {
				t.Errorf("ssh-publickey: %v", err)
			}
			for _, o := range []metav1.Object{&cm, &secret} {
				if ref := metav1.GetControllerOf(o); ref == nil || ref.Kind != "TrainJob" || ref.Name != "ds" {
					t.Errorf("%s: controller %v, want the TrainJob", o.GetName(), ref)
				}
			}

			// The JobSet comes last in the plan, after the ConfigMap and Secret.
			created := get(t, ns, "ds")
			var jss []jobsetv1alpha2.JobSet
			waitFor(t, short, func() error {
				if jss = jobSetsOf(t, created); len(jss) != 1 {
					return fmt.Errorf("%d JobSets", len(jss))
				}
				return nil
			})
			for _, rj := range jss[0].Spec.ReplicatedJobs {
				ps := rj.Template.Spec.Template.Spec
				c := ps.Containers[0]
				cEnv, cMounts := c.Env, c.VolumeMounts
				if rj.Name == "launcher" { // the trainer: it reports to the status server
					cEnv, cMounts = withoutStatusServer(t, c)
				}
				mounts := map[string]string{}
				for _, m := range cMounts {
					mounts[m.Name] = m.MountPath
				}
				env := map[string]string{}
				for _, e := range cEnv {
					env[e.Name] = e.Value
				}
				switch rj.Name {
				case "launcher":
					if diff := cmp.Diff(map[string]string{"mpi-ssh-auth": "/home/mpiuser/.ssh", "mpi-hostfile": "/etc/mpi"}, mounts); diff != "" {
						t.Errorf("launcher mounts (-want +got):\n%s", diff)
					}
					wantEnv := map[string]string{
						"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
						"OMPI_MCA_orte_set_default_slots": "1", "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10", "EPOCHS": "3",
						// Open MPI 5's, as Kubeflow Trainer v2.4 sets them.
						"PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile", "PRTE_MCA_prte_keep_fqdn_hostnames": "false",
						"PRTE_MCA_prte_set_default_slots": "1", "PRTE_MCA_plm_ssh_args": "-o ConnectionAttempts=10",
					}
					if diff := cmp.Diff(wantEnv, env); diff != "" {
						t.Errorf("launcher env (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(job.Spec.Trainer.Command, c.Command); diff != "" {
						t.Errorf("launcher command (-want +got):\n%s", diff)
					}
				case "node":
					if diff := cmp.Diff(map[string]string{"mpi-ssh-auth": "/home/mpiuser/.ssh"}, mounts); diff != "" {
						t.Errorf("node mounts (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(map[string]string{"EPOCHS": "3"}, env); diff != "" {
						t.Errorf("node env (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff([]string{"/usr/sbin/sshd"}, c.Command); diff != "" {
						t.Errorf("node command (-want +got):\n%s", diff)
					}
					if want := int32(len(tc.hosts) - 1); ptr.Deref(rj.Template.Spec.Parallelism, 1) != want {
						t.Errorf("node parallelism %d, want %d", ptr.Deref(rj.Template.Spec.Parallelism, 1), want)
					}
				}
			}

			done := waitState(t, ns, "ds", trainer.TrainJobCompletePhase, "", long)
			checkConditions(t, done, upstreamCondition{trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully"})
			var names []string
			for _, s := range done.Status.JobsStatus {
				names = append(names, s.Name)
				if s.Name == "launcher" && ptr.Deref(s.Succeeded, 0) != 1 {
					t.Errorf("launcher %+v, want 1 succeeded", s)
				}
			}
			if diff := cmp.Diff([]string{"node", "launcher"}, names); diff != "" {
				t.Errorf("jobsStatus names (-want +got):\n%s", diff)
			}
		})
	}
}
