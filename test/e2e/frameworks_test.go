package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// TestFrameworkRuntimes runs a TrainJob on each shipped runtime whose framework
// has no Debian package to run it for real (JAX, Flux, torchtune): the runtime
// is applied unchanged (the cluster applies runtimes/), the JobSet (and the
// Flux ConfigMap and Secret) carry what Kubeflow Trainer's plugins render, and
// the TrainJob completes on kwok's nodes with a jobsStatus entry per
// replicated job. XGBoost trains for real in test/processnode_e2e.
func TestFrameworkRuntimes(t *testing.T) {
	completionIndex := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
	cases := []struct {
		name    string
		runtime string
		trainer trainer.Trainer
		setup   func(t *testing.T, ns string)
		// check inspects the running JobSet's trainer pod spec and the TrainJob's other children.
		check    func(t *testing.T, ns, job string, ps corev1.PodSpec)
		wantJobs []string
	}{{
		name:    "jax",
		runtime: "jax-distributed",
		trainer: trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"python3", "train.py"}},
		check: func(t *testing.T, _, job string, ps corev1.PodSpec) {
			node := ps.Containers[0]
			env, _ := withoutStatusServer(t, node)
			want := []corev1.EnvVar{
				{Name: "JAX_NUM_PROCESSES", Value: "2"},
				{Name: "JAX_PROCESS_ID", ValueFrom: completionIndex},
				{Name: "JAX_COORDINATOR_ADDRESS", Value: job + "-node-0-0." + job + ":29500"},
			}
			// The API server may default fieldRef.apiVersion; the path is what counts.
			for _, e := range env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
					e.ValueFrom.FieldRef.APIVersion = ""
				}
			}
			if diff := cmp.Diff(want, env); diff != "" {
				t.Errorf("node env (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}}, node.Ports); diff != "" {
				t.Errorf("node ports (-want +got):\n%s", diff)
			}
		},
		wantJobs: []string{"node"},
	}, {
		name:    "flux",
		runtime: "flux-distributed",
		trainer: trainer.Trainer{NumNodes: ptr.To[int32](2), Command: []string{"lmp"}, Args: []string{"-in", "in.reaxc"}},
		check: func(t *testing.T, ns, job string, ps corev1.PodSpec) {
			node := ps.Containers[0]
			if diff := cmp.Diff([]string{"/bin/bash", "/etc/flux-config/entrypoint.sh", "lmp -in in.reaxc"}, node.Command); diff != "" {
				t.Errorf("node command (-want +got):\n%s", diff)
			}
			if len(node.Args) != 0 {
				t.Errorf("node args %q, want none (they are part of the command)", node.Args)
			}
			if len(ps.InitContainers) != 1 || ps.InitContainers[0].Name != "flux-installer" ||
				ps.InitContainers[0].Image != "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy" {
				t.Errorf("init containers %+v, want the flux-installer with the default view image", ps.InitContainers)
			}
			var vols, mounts []string
			for _, v := range ps.Volumes {
				if v.Name != statusServerVolume {
					vols = append(vols, v.Name)
				}
			}
			_, nodeMounts := withoutStatusServer(t, node)
			for _, m := range nodeMounts {
				mounts = append(mounts, m.Name+":"+m.MountPath)
			}
			entry := job + "-flux-entrypoint"
			if diff := cmp.Diff([]string{"spack-install", "flux-install", entry, "shared-memory", "flux-curve"}, vols); diff != "" {
				t.Errorf("volumes (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"flux-install:/mnt/flux", "spack-install:/opt/software", entry + ":/etc/flux-config",
				"flux-curve:/curve", "shared-memory:/dev/shm"}, mounts); diff != "" {
				t.Errorf("node mounts (-want +got):\n%s", diff)
			}
			var cm corev1.ConfigMap
			if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: entry}, &cm); err != nil {
				t.Fatal(err)
			}
			if cm.Data["entrypoint.sh"] == "" || cm.Data["init.sh"] == "" {
				t.Errorf("ConfigMap %s keys %v, want entrypoint.sh and init.sh", entry, maps(cm.Data))
			}
			var sec corev1.Secret
			if err := cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: job + "-flux-curve"}, &sec); err != nil {
				t.Fatal(err)
			}
			if len(sec.Data["curve.cert"]) == 0 || sec.Type != corev1.SecretTypeOpaque {
				t.Errorf("Secret %s: type %s, keys %v", sec.Name, sec.Type, len(sec.Data))
			}
			for _, o := range []metav1.Object{&cm, &sec} {
				if ref := metav1.GetControllerOf(o); ref == nil || ref.Kind != "TrainJob" || ref.Name != job {
					t.Errorf("%s: controller %+v, want TrainJob %s", o.GetName(), ref, job)
				}
			}
		},
		wantJobs: []string{"node"},
	}, {
		name:    "torchtune",
		runtime: "torchtune-llama3.2-1b",
		trainer: trainer.Trainer{Command: []string{"tune", "run"}, Args: []string{"epochs=1"}},
		setup: func(t *testing.T, ns string) {
			// A volume for the runtime's initializer claim (the cluster has no provisioner).
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "torchtune-" + ns},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
					AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns}},
				},
			}
			if err := cli.Create(ctx(), pv); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cli.Delete(ctx(), pv) })
		},
		check: func(t *testing.T, _, job string, ps corev1.PodSpec) {
			node := ps.Containers[0]
			want := []string{"tune", "run", "--rdzv_endpoint=" + job + "-node-0-0." + job + ":29500", "full_finetune_distributed",
				"--config", "llama3_2/1B_full", "output_dir=/workspace/output",
				"tokenizer.path=/workspace/model/original/tokenizer.model", "checkpointer.checkpoint_dir=/workspace/model"}
			if diff := cmp.Diff(want, node.Command); diff != "" {
				t.Errorf("node command (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"epochs=1"}, node.Args); diff != "" {
				t.Errorf("node args (-want +got):\n%s", diff)
			}
			for _, e := range node.Env {
				if e.Name == "PET_MASTER_ADDR" || e.Name == "PET_MASTER_PORT" {
					t.Errorf("torchtune node has %s", e.Name)
				}
			}
		},
		wantJobs: []string{"dataset-initializer", "model-initializer", "node"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			if tc.setup != nil {
				tc.setup(t, ns)
			}
			job := &trainer.TrainJob{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: ns},
				Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: tc.runtime}, Trainer: tc.trainer.DeepCopy()},
			}
			if err := cli.Create(ctx(), job); err != nil {
				t.Fatal(err)
			}
			var js jobsetv1alpha2.JobSet
			waitFor(t, long, func() error { return cli.Get(ctx(), client.ObjectKey{Namespace: ns, Name: job.Name}, &js) })
			i := slices.IndexFunc(js.Spec.ReplicatedJobs, func(rj jobsetv1alpha2.ReplicatedJob) bool { return rj.Name == "node" })
			if i < 0 {
				t.Fatalf("JobSet has no node job: %+v", js.Spec.ReplicatedJobs)
			}
			tc.check(t, ns, job.Name, js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec)

			done := waitState(t, ns, job.Name, trainer.TrainJobCompletePhase, "", long)
			checkConditions(t, done, upstreamCondition{trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted", "jobset completed successfully"})
			var got []string
			for _, s := range done.Status.JobsStatus {
				got = append(got, fmt.Sprintf("%s succeeded=%d failed=%d", s.Name, ptr.Deref(s.Succeeded, -1), ptr.Deref(s.Failed, -1)))
			}
			var want []string
			for _, n := range tc.wantJobs {
				want = append(want, n+" succeeded=1 failed=0")
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("jobsStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func maps(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
