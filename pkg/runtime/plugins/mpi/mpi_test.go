package mpi_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/observe"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/mpi"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func loadRuntime(t *testing.T, name string) *runtime.Runtime {
	t.Helper()
	rt, err := rtt.LoadRuntimeFile(filepath.Join(rtt.RepoRoot(), "runtimes", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// build runs the whole pipeline and returns the plan.
func build(t *testing.T, job *trainer.TrainJob, rt *runtime.Runtime) *plan.Plan {
	t.Helper()
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	p, err := fw.Build(runtime.TrainJobRequest(job), rt)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

func podSpec(t *testing.T, js *jobsetv1alpha2.JobSet, rjob string) corev1.PodSpec {
	t.Helper()
	for _, rj := range js.Spec.ReplicatedJobs {
		if rj.Name == rjob {
			return rj.Template.Spec.Template.Spec
		}
	}
	t.Fatalf("JobSet has no replicated job %s", rjob)
	return corev1.PodSpec{}
}

func parallelism(t *testing.T, js *jobsetv1alpha2.JobSet) map[string][2]int32 {
	t.Helper()
	out := map[string][2]int32{}
	for _, rj := range js.Spec.ReplicatedJobs {
		out[rj.Name] = [2]int32{ptr.Deref(rj.Template.Spec.Parallelism, 1), ptr.Deref(rj.Template.Spec.Completions, 1)}
	}
	return out
}

func sshVolume(tj string) corev1.Volume {
	return corev1.Volume{Name: "mpi-ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName:  tj + "-mpi-ssh-auth",
		DefaultMode: ptr.To[int32](256),
		Items: []corev1.KeyToPath{
			{Key: "ssh-privatekey", Path: "id_rsa", Mode: ptr.To[int32](416)},
			{Key: "ssh-publickey", Path: "id_rsa.pub", Mode: ptr.To[int32](420)},
			{Key: "ssh-publickey", Path: "authorized_keys", Mode: ptr.To[int32](420)},
		},
	}}}
}

func hostfileVolume(tj string) corev1.Volume {
	return corev1.Volume{Name: "mpi-hostfile", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: tj + "-mpi-hostfile"},
		Items:                []corev1.KeyToPath{{Key: "hostfile", Path: "hostfile", Mode: ptr.To[int32](292)}},
	}}}
}

func ompiEnv(slots string) []corev1.EnvVar {
	return []corev1.EnvVar{
		rtt.Env("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
		rtt.Env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
		rtt.Env("OMPI_MCA_orte_set_default_slots", slots),
		rtt.Env("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
		rtt.Env("PRTE_MCA_prte_default_hostfile", "/etc/mpi/hostfile"),
		rtt.Env("PRTE_MCA_prte_keep_fqdn_hostnames", "false"),
		rtt.Env("PRTE_MCA_prte_set_default_slots", slots),
		rtt.Env("PRTE_MCA_plm_ssh_args", "-o ConnectionAttempts=10"),
	}
}

func hostfile(tj string, data string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: tj + "-mpi-hostfile", Namespace: "ns"},
		Data:       map[string]string{"hostfile": data},
	}
}

// deepspeedPods are the pod specs of deepspeed-distributed (and
// mlx-distributed, with another image) after the plugin: the launcher runs the
// TrainJob's program with the hostfile and OMPI settings, the nodes sshd.
func deepspeedPods(tj, image, launcherImage string, launcherCmd []string, launcherEnv, nodeEnv []corev1.EnvVar, nodeRes corev1.ResourceRequirements) (node, launcher corev1.PodSpec) {
	sshMount := corev1.VolumeMount{Name: "mpi-ssh-auth", MountPath: "/home/mpiuser/.ssh"}
	node = corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)},
		Volumes:         []corev1.Volume{sshVolume(tj)},
		Containers: []corev1.Container{{
			Name:            "node",
			Image:           image,
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)},
			Command:         []string{"/usr/sbin/sshd"},
			Args:            []string{"-De", "-f", "/home/mpiuser/.sshd_config"},
			Env:             nodeEnv,
			Resources:       nodeRes,
			VolumeMounts:    []corev1.VolumeMount{sshMount},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2222)}},
				InitialDelaySeconds: 5,
			},
		}},
	}
	launcher = corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{FSGroup: ptr.To[int64](1000)},
		Volumes:         []corev1.Volume{sshVolume(tj), hostfileVolume(tj)},
		Containers: []corev1.Container{{
			Name:            "node",
			Image:           launcherImage,
			SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)},
			Command:         launcherCmd,
			Env:             launcherEnv,
			Resources:       nodeRes,
			VolumeMounts:    []corev1.VolumeMount{sshMount, {Name: "mpi-hostfile", MountPath: "/etc/mpi"}},
		}},
	}
	return node, launcher
}

func TestBuildUpstreamRuntimes(t *testing.T) {
	const tj = "job"
	trainEnv := []corev1.EnvVar{rtt.Env("EPOCHS", "3")}
	mpirun := []string{"mpirun", "python3", "train.py"}
	fourGPUs := rtt.Limits("nvidia.com/gpu", "4")
	fourGPUs.Requests = rtt.ResourceList("nvidia.com/gpu", "4")
	cases := map[string]struct {
		runtime      string
		rt           func(*runtime.Runtime)
		job          *trainer.TrainJob
		wantCounts   map[string][2]int32
		wantHostfile string
		wantLauncher []corev1.EnvVar
		wantNodeEnv  []corev1.EnvVar
		wantNodeRes  corev1.ResourceRequirements
		// trainerImg is the TrainJob's image: Kubeflow Trainer v2.4 runs it
		// on the launcher and on the node pods.
		trainerImg  string
		launcherCmd []string
	}{
		"deepspeed, numNodes 3: two node pods and the launcher, all in the hostfile": {
			runtime: "deepspeed-distributed",
			job: rtt.MakeTrainJob("ns", tj).RuntimeRef(trainer.ClusterTrainingRuntimeKind, "deepspeed-distributed").
				NumNodes(3).Command(mpirun...).Env(trainEnv...).Obj(),
			wantCounts: map[string][2]int32{"node": {2, 2}, "launcher": {1, 1}},
			wantHostfile: "job-node-0-0.job slots=1\njob-node-0-1.job slots=1\n" +
				"job-launcher-0-0.job slots=1\n",
			wantLauncher: append(ompiEnv("1"), trainEnv...),
			wantNodeEnv:  trainEnv,
			launcherCmd:  mpirun,
		},
		"mlx without a trainer block: one node pod and the launcher": {
			runtime:      "mlx-distributed",
			job:          rtt.MakeTrainJob("ns", tj).RuntimeRef(trainer.ClusterTrainingRuntimeKind, "mlx-distributed").Obj(),
			wantCounts:   map[string][2]int32{"node": {1, 1}, "launcher": {1, 1}},
			wantHostfile: "job-node-0-0.job slots=1\njob-launcher-0-0.job slots=1\n",
			wantLauncher: ompiEnv("1"),
		},
		"numNodes 1 still has one node pod": {
			runtime:      "deepspeed-distributed",
			job:          rtt.MakeTrainJob("ns", tj).NumNodes(1).Obj(),
			wantCounts:   map[string][2]int32{"node": {1, 1}, "launcher": {1, 1}},
			wantHostfile: "job-node-0-0.job slots=1\njob-launcher-0-0.job slots=1\n",
			wantLauncher: ompiEnv("1"),
		},
		"numProcPerNode and a subdomain": {
			runtime: "deepspeed-distributed",
			rt: func(rt *runtime.Runtime) {
				rt.Spec.Template.Spec.Network.Subdomain = "mpi"
			},
			job:          rtt.MakeTrainJob("ns", tj).NumNodes(2).NumProcPerNode(intstr.FromInt32(4)).Obj(),
			wantCounts:   map[string][2]int32{"node": {1, 1}, "launcher": {1, 1}},
			wantHostfile: "job-node-0-0.mpi slots=4\njob-launcher-0-0.mpi slots=4\n",
			wantLauncher: ompiEnv("4"),
		},
		"GPUs per node replace the default single slot, and reach the node pods": {
			runtime:      "deepspeed-distributed",
			job:          rtt.MakeTrainJob("ns", tj).NumNodes(2).ResourcesPerNode(fourGPUs).Obj(),
			wantCounts:   map[string][2]int32{"node": {1, 1}, "launcher": {1, 1}},
			wantHostfile: "job-node-0-0.job slots=4\njob-launcher-0-0.job slots=4\n",
			wantLauncher: ompiEnv("4"),
			wantNodeRes:  fourGPUs,
		},
		"the runtime's launcher env stays first, a TrainJob value replaces it in place": {
			runtime: "deepspeed-distributed",
			rt: func(rt *runtime.Runtime) {
				c := &rt.Spec.Template.Spec.ReplicatedJobs[1].Template.Spec.Template.Spec.Containers[0]
				c.Env = []corev1.EnvVar{rtt.Env("LOG", "info"), rtt.Env("KEEP", "1")}
			},
			job:          rtt.MakeTrainJob("ns", tj).Image("me/train:v1").Env(rtt.Env("A", "a"), rtt.Env("LOG", "debug")).Obj(),
			wantCounts:   map[string][2]int32{"node": {1, 1}, "launcher": {1, 1}},
			wantHostfile: "job-node-0-0.job slots=1\njob-launcher-0-0.job slots=1\n",
			wantLauncher: append(append([]corev1.EnvVar{rtt.Env("LOG", "debug"), rtt.Env("KEEP", "1")}, ompiEnv("1")...), rtt.Env("A", "a")),
			wantNodeEnv:  []corev1.EnvVar{rtt.Env("A", "a"), rtt.Env("LOG", "debug")},
			trainerImg:   "me/train:v1",
		},
		"numNodes 0: no node pod, no launcher pod, an empty hostfile": {
			runtime:      "deepspeed-distributed",
			job:          rtt.MakeTrainJob("ns", tj).NumNodes(0).Image("me/train:v1").Obj(),
			wantCounts:   map[string][2]int32{"node": {0, 0}, "launcher": {0, 0}},
			wantHostfile: "",
			wantLauncher: ompiEnv("1"),
			trainerImg:   "me/train:v1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rt := loadRuntime(t, tc.runtime)
			if tc.rt != nil {
				tc.rt(rt)
			}
			p := build(t, tc.job, rt)
			if len(p.Children) != 3 {
				t.Fatalf("%d children, want the hostfile, the Secret and the JobSet", len(p.Children))
			}
			if diff := cmp.Diff(hostfile(tj, tc.wantHostfile), p.Children[0].Object); diff != "" {
				t.Errorf("hostfile ConfigMap (-want +got):\n%s", diff)
			}
			if p.Children[0].Rule != plan.RuleApply || p.Children[1].Rule != plan.RuleCreateOnce || p.Children[1].BeforeCreate == nil {
				t.Errorf("rules %s, %s (hook set %v): want Apply for the hostfile, CreateOnce with a key maker for the Secret",
					p.Children[0].Rule, p.Children[1].Rule, p.Children[1].BeforeCreate != nil)
			}
			wantSecret := &corev1.Secret{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{Name: tj + "-mpi-ssh-auth", Namespace: "ns"},
				Type:       corev1.SecretTypeSSHAuth,
				Immutable:  ptr.To(true),
			}
			if diff := cmp.Diff(wantSecret, p.Children[1].Object); diff != "" {
				t.Errorf("Secret before creation (-want +got):\n%s", diff)
			}
			js := p.JobSet()
			if diff := cmp.Diff(tc.wantCounts, parallelism(t, js)); diff != "" {
				t.Errorf("parallelism, completions (-want +got):\n%s", diff)
			}
			image := "ghcr.io/kubeflow/trainer/" + map[string]string{"deepspeed-distributed": "deepspeed", "mlx-distributed": "mlx"}[tc.runtime] + "-runtime:v2.4.0"
			if tc.trainerImg != "" {
				image = tc.trainerImg
			}
			wantNode, wantLauncher := deepspeedPods(tj, image, image, tc.launcherCmd, tc.wantLauncher, tc.wantNodeEnv, tc.wantNodeRes)
			if diff := cmp.Diff(wantNode, podSpec(t, js, "node")); diff != "" {
				t.Errorf("node pod spec (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantLauncher, podSpec(t, js, "launcher")); diff != "" {
				t.Errorf("launcher pod spec (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildMPIDistributed: the CPU runtime does not run ranks on the launcher,
// so numNodes is the node pod count and the hostfile lists only node pods.
func TestBuildMPIDistributed(t *testing.T) {
	job := rtt.MakeTrainJob("ns", "job").NumNodes(2).Command("mpirun", "python3", "-c", "pass").Obj()
	p := build(t, job, loadRuntime(t, "mpi-distributed"))
	if diff := cmp.Diff(hostfile("job", "job-node-0-0.job slots=1\njob-node-0-1.job slots=1\n"), p.Children[0].Object); diff != "" {
		t.Errorf("hostfile (-want +got):\n%s", diff)
	}
	js := p.JobSet()
	if diff := cmp.Diff(map[string][2]int32{"node": {2, 2}, "launcher": {1, 1}}, parallelism(t, js)); diff != "" {
		t.Errorf("parallelism, completions (-want +got):\n%s", diff)
	}
	launcher := podSpec(t, js, "launcher")
	wantEnv := append([]corev1.EnvVar{
		rtt.Env("OMPI_ALLOW_RUN_AS_ROOT", "1"),
		rtt.Env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
		rtt.Env("OMPI_MCA_plm_rsh_agent", "ssh -p 2222 -i /tmp/ssh-key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"),
		rtt.Env("OMPI_MCA_plm_rsh_no_tree_spawn", "1"),
	}, ompiEnv("1")...)
	if diff := cmp.Diff(wantEnv, launcher.Containers[0].Env); diff != "" {
		t.Errorf("launcher env (-want +got):\n%s", diff)
	}
	wantMounts := []corev1.VolumeMount{
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "mpi-ssh-auth", MountPath: "/root/.ssh"},
		{Name: "mpi-hostfile", MountPath: "/etc/mpi"},
	}
	if diff := cmp.Diff(wantMounts, launcher.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("launcher mounts (-want +got):\n%s", diff)
	}
	// The init container is not named node: the plugin leaves it as the runtime wrote it.
	wantInit := []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "mpi-ssh-auth", MountPath: "/root/.ssh", ReadOnly: true}}
	if diff := cmp.Diff(wantInit, launcher.InitContainers[0].VolumeMounts); diff != "" {
		t.Errorf("launcher init mounts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, sshVolume("job"), hostfileVolume("job")}, launcher.Volumes); diff != "" {
		t.Errorf("launcher volumes (-want +got):\n%s", diff)
	}
	node := podSpec(t, js, "node")
	if node.Containers[0].Env != nil {
		t.Errorf("node env %v: the launcher is no node here, the TrainJob's env stays on the launcher", node.Containers[0].Env)
	}
	if diff := cmp.Diff(corev1.VolumeMount{Name: "mpi-ssh-auth", MountPath: "/root/.ssh"}, node.Containers[0].VolumeMounts[2]); diff != "" {
		t.Errorf("node ssh mount (-want +got):\n%s", diff)
	}
}

// TestBuildWithoutMPIPolicy: other runtimes get nothing from the plugin.
func TestBuildWithoutMPIPolicy(t *testing.T) {
	p := build(t, rtt.MakeTrainJob("ns", "job").NumNodes(2).Obj(), rtt.MustTorchDistributedRuntime())
	if len(p.Children) != 1 || p.JobSet() == nil {
		t.Errorf("children %v, want the JobSet alone", p.Objects())
	}
}

func TestNames(t *testing.T) {
	job := rtt.MakeTrainJob("ns", "job").Obj()
	got := []string{mpi.New().Name(), mpi.SecretName(runtime.TrainJobRequest(job)), mpi.HostfileName(runtime.TrainJobRequest(job))}
	if diff := cmp.Diff([]string{"MPI", "job-mpi-ssh-auth", "job-mpi-hostfile"}, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"mpi"}, mpi.New().ClaimsMLPolicies()); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Secret", "ConfigMap"}, kinds(mpi.New())); diff != "" {
		t.Errorf("owns (-want +got):\n%s", diff)
	}
}

func kinds(p *mpi.MPI) []string {
	var out []string
	for _, o := range p.Owns() {
		switch o.(type) {
		case *corev1.Secret:
			out = append(out, "Secret")
		case *corev1.ConfigMap:
			out = append(out, "ConfigMap")
		default:
			out = append(out, "?")
		}
	}
	return out
}

// TestStatus: with the runtime's successPolicy the JobSet completes when the
// launcher does (the node pods' sshd never exits); the TrainJob is Complete and
// its jobsStatus lists the node job and the launcher, in the runtime's order.
func TestStatus(t *testing.T) {
	job := rtt.MakeTrainJob("ns", "job").NumNodes(3).Command("mpirun", "train").Obj()
	js := build(t, job, loadRuntime(t, "deepspeed-distributed")).JobSet()
	if diff := cmp.Diff(&jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll, TargetReplicatedJobs: []string{"launcher"}}, js.Spec.SuccessPolicy); diff != "" {
		t.Fatalf("successPolicy (-want +got):\n%s", diff)
	}
	at := metav1.Now()
	js.Status = jobsetv1alpha2.JobSetStatus{
		Conditions: []metav1.Condition{{Type: string(jobsetv1alpha2.JobSetCompleted), Status: metav1.ConditionTrue,
			Reason: "AllJobsCompleted", Message: "jobset completed successfully", LastTransitionTime: at}},
		ReplicatedJobsStatus: []jobsetv1alpha2.ReplicatedJobStatus{
			{Name: "launcher", Succeeded: 1},
			{Name: "node", Active: 1, Ready: 1},
		},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	got := fw.Status(job.Name, rtt.ObservedJobSet(js))
	want := framework.Facts{
		Finished: &observe.Finish{Reason: "AllJobsCompleted", Message: "jobset completed successfully", Time: at},
		Jobs:     []observe.JobCounts{{Name: "node", Ready: 1, Active: 1}, {Name: "launcher", Succeeded: 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
}
