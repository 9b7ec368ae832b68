package mpijob

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/plan"
)

// pi is v1's example MPIJob: a launcher running mpirun and 2 workers
// without a command.
func pi(mutate ...func(*kubeflowv1.MPIJob)) *kubeflowv1.MPIJob {
	spec := func(n int32, name string, cmd ...string) *kubeflowv1.ReplicaSpec {
		return &kubeflowv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: name, Image: "mpi:1", Command: cmd}}}}}
	}
	j := &kubeflowv1.MPIJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pi"},
		Spec: kubeflowv1.MPIJobSpec{
			SlotsPerWorker: ptr.To[int32](2),
			MPIReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
				kubeflowv1.MPIJobReplicaTypeLauncher: spec(1, "launcher", "mpirun", "-n", "4", "/pi"),
				kubeflowv1.MPIJobReplicaTypeWorker:   spec(2, "worker"),
			},
		},
	}
	for _, m := range mutate {
		m(j)
	}
	return j
}

func TestDefaults(t *testing.T) {
	j := pi(func(j *kubeflowv1.MPIJob) {
		j.Spec.SlotsPerWorker = nil
		j.Spec.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyRunning)
		j.Spec.MPIReplicaSpecs["worker"] = j.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker]
		delete(j.Spec.MPIReplicaSpecs, kubeflowv1.MPIJobReplicaTypeWorker)
		j.Spec.MPIReplicaSpecs["worker"].Replicas = nil
	})
	d := Def.Defaulted(j).(*kubeflowv1.MPIJob)
	got := map[string]any{
		"slots":     *d.Spec.SlotsPerWorker,
		"clean":     *d.Spec.RunPolicy.CleanPodPolicy,
		"workers":   *d.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker].Replicas,
		"launcher":  *d.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeLauncher].Replicas,
		"restart":   d.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker].RestartPolicy,
		"unchanged": j.Spec.SlotsPerWorker == nil,
	}
	want := map[string]any{
		"slots": int32(1), "clean": kubeflowv1.CleanPodPolicyRunning, "workers": int32(0), "launcher": int32(1),
		"restart": kubeflowv1.RestartPolicyNever, "unchanged": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		job  *kubeflowv1.MPIJob
		want []string
	}{
		"valid": {job: pi()},
		"no launcher": {
			job:  pi(func(j *kubeflowv1.MPIJob) { delete(j.Spec.MPIReplicaSpecs, kubeflowv1.MPIJobReplicaTypeLauncher) }),
			want: []string{"spec.mpiReplicaSpecs[Launcher]: Required value: a MPIJob must have a Launcher"},
		},
		"two launchers": {
			job: pi(func(j *kubeflowv1.MPIJob) {
				j.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeLauncher].Replicas = ptr.To[int32](2)
			}),
			want: []string{"spec.mpiReplicaSpecs[Launcher].replicas: Forbidden: must be 1"},
		},
		"unknown replica type": {
			job: pi(func(j *kubeflowv1.MPIJob) {
				j.Spec.MPIReplicaSpecs["Server"] = j.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker]
			}),
			want: []string{`spec.mpiReplicaSpecs[Server]: Unsupported value: "Server": supported values: "Launcher", "Worker"`},
		},
		"no image, no slots, bad main container": {
			job: pi(func(j *kubeflowv1.MPIJob) {
				j.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker].Template.Spec.Containers[0].Image = ""
				j.Spec.SlotsPerWorker = ptr.To[int32](0)
				j.Spec.MainContainer = "mpi"
			}),
			want: []string{
				"spec.mpiReplicaSpecs[Worker].template.spec.containers[0].image: Required value: must be required",
				"spec.slotsPerWorker: Invalid value: 0: must be at least 1",
				`spec.mainContainer: Invalid value: "mpi": must name a container of the Launcher`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, e := range Def.Validate(nil, tc.job) {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// build plans a defaulted pi.
func build(t *testing.T, j *kubeflowv1.MPIJob) *plan.Plan {
	t.Helper()
	fw, err := Def.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Def.Build(fw, Def.Defaulted(j), "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPlan(t *testing.T) {
	p := build(t, pi())
	var kinds []string
	var cm *corev1.ConfigMap
	var secret *corev1.Secret
	for _, c := range p.Children {
		kinds = append(kinds, c.Object.GetObjectKind().GroupVersionKind().Kind+" "+c.Object.GetName())
		switch o := c.Object.(type) {
		case *corev1.ConfigMap:
			cm = o
		case *corev1.Secret:
			secret = o
		}
	}
	if diff := cmp.Diff([]string{"ConfigMap pi-config", "Secret pi-ssh", "Service pi-launcher-0", "Service pi-worker-0", "Service pi-worker-1", "JobSet pi"}, kinds); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
	if got, want := cm.Data[HostfileKey], "pi-worker-0 slots=2\npi-worker-1 slots=2\n"; got != want {
		t.Errorf("hostfile %q, want %q", got, want)
	}
	if !strings.Contains(cm.Data[DiscoverKey], "echo pi-worker-1:2\n") {
		t.Errorf("discover_hosts.sh lacks worker 1:\n%s", cm.Data[DiscoverKey])
	}
	if !strings.Contains(cm.Data[KubexecKey], "exec ssh $opts \"$host\" \"$@\"") || !strings.Contains(cm.Data[SSHDKey], "exec /usr/sbin/sshd -De") {
		t.Errorf("transport scripts:\n%s\n%s", cm.Data[KubexecKey], cm.Data[SSHDKey])
	}
	if secret.Type != corev1.SecretTypeSSHAuth || !ptr.Deref(secret.Immutable, false) {
		t.Errorf("secret %+v: want an immutable ssh-auth Secret", secret)
	}

	js := p.JobSet()
	var names []string
	for _, rj := range js.Spec.ReplicatedJobs {
		names = append(names, rj.Name)
	}
	if diff := cmp.Diff([]string{"launcher-0", "worker-0", "worker-1"}, names); diff != "" {
		t.Errorf("replicated jobs (-want +got):\n%s", diff)
	}
	if sp := js.Spec.SuccessPolicy; sp == nil || !slices.Equal(sp.TargetReplicatedJobs, []string{"launcher-0"}) {
		t.Errorf("success policy %+v: want the launcher's", sp)
	}
	launcher := js.Spec.ReplicatedJobs[0].Template.Spec.Template
	if launcher.Spec.Hostname != "pi-launcher" {
		t.Errorf("launcher host name %q, want v1's pi-launcher", launcher.Spec.Hostname)
	}
	var env []string
	for _, e := range launcher.Spec.Containers[0].Env {
		env = append(env, e.Name+"="+e.Value)
	}
	wantEnv := []string{
		"OMPI_MCA_plm_rsh_agent=/etc/mpi/kubexec.sh",
		"OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile",
		"I_MPI_HYDRA_BOOTSTRAP=rsh",
		"I_MPI_HYDRA_BOOTSTRAP_EXEC=/etc/mpi/kubexec.sh",
		"NVIDIA_VISIBLE_DEVICES=",
		"OMPI_MCA_plm_rsh_no_tree_spawn=1",
	}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("launcher env (-want +got):\n%s", diff)
	}
	if got := launcher.Spec.RestartPolicy; got != corev1.RestartPolicyNever {
		t.Errorf("launcher restart policy %s, want Never (v1's default)", got)
	}
	w := js.Spec.ReplicatedJobs[2].Template.Spec.Template
	if w.Spec.Hostname != "pi-worker-1" || !slices.Equal(w.Spec.Containers[0].Command, []string{"/bin/sh", "/etc/mpi/sshd.sh"}) {
		t.Errorf("worker 1: host %q, command %q; want pi-worker-1 running sshd.sh", w.Spec.Hostname, w.Spec.Containers[0].Command)
	}
	if len(w.Spec.Containers[0].Env) != 0 {
		t.Errorf("worker env %v: v1 gives workers none", w.Spec.Containers[0].Env)
	}
	for k, v := range map[string]string{kubeflowv1.JobNameLabel: "pi", kubeflowv1.OperatorNameLabel: "mpijob-controller",
		kubeflowv1.ReplicaTypeLabel: "worker", kubeflowv1.ReplicaIndexLabel: "1"} {
		if w.Labels[k] != v {
			t.Errorf("worker 1 label %s=%q, want %q", k, w.Labels[k], v)
		}
	}
	if launcher.Labels[kubeflowv1.JobRoleLabel] != "master" {
		t.Errorf("launcher job-role %q, want master", launcher.Labels[kubeflowv1.JobRoleLabel])
	}
}

// A launcher with GPUs sees them and is in the hostfile, as in v1; a worker
// with its own command keeps it.
func TestPlanGPULauncher(t *testing.T) {
	p := build(t, pi(func(j *kubeflowv1.MPIJob) {
		j.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeLauncher].Template.Spec.Containers[0].Resources.Limits =
			corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		j.Spec.MPIReplicaSpecs[kubeflowv1.MPIJobReplicaTypeWorker].Template.Spec.Containers[0].Command = []string{"/start-sshd"}
	}))
	for _, c := range p.Children {
		if cm, ok := c.Object.(*corev1.ConfigMap); ok {
			if got, want := cm.Data[HostfileKey], "pi-launcher slots=2\npi-worker-0 slots=2\npi-worker-1 slots=2\n"; got != want {
				t.Errorf("hostfile %q, want %q", got, want)
			}
		}
	}
	js := p.JobSet()
	for _, e := range js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "NVIDIA_VISIBLE_DEVICES" {
			t.Errorf("a GPU launcher got NVIDIA_VISIBLE_DEVICES=%q", e.Value)
		}
	}
	if got := js.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0].Command; !slices.Equal(got, []string{"/start-sshd"}) {
		t.Errorf("worker command %q, want its own", got)
	}
}
