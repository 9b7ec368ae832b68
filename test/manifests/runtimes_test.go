package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
	"github.com/trainyard/trainyard/pkg/runtime/plugins"
	"github.com/trainyard/trainyard/pkg/runtime/plugins/initializer"
	"github.com/trainyard/trainyard/pkg/validation"
)

// The runtimes catalog under runtimes/, with the framework label each carries.
// The Kubeflow SDK lists only runtimes with that label; it treats the value as a
// name (only "torchtune" changes its behaviour), and picks the command from the
// mlPolicy: torchrun for torch, plain python without a framework policy.
var catalog = map[string]string{
	"torch-distributed":              "torch",
	"torch-distributed-gpu":          "torch",
	"torch-distributed-with-dataset": "torch",
	"plain-ml":                       "plainml",
	"jax-distributed":                "jax",
	"xgboost-distributed":            "xgboost",
	"flux-distributed":               "flux",
	"torchtune-llama3.2-1b":          "torchtune",
	"torchtune-llama3.2-3b":          "torchtune",
	"torchtune-qwen2.5-1.5b":         "torchtune",
	"mpi-distributed":                "mpi",
	"deepspeed-distributed":          "deepspeed",
	"mlx-distributed":                "mlx",
}

// mpiFrameworks are the catalog's MPI runtimes: a launcher (the trainer) and a
// node job of SSH servers.
var mpiFrameworks = []string{"mpi", "deepspeed", "mlx"}

const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// loadRuntimes decodes every file of runtimes/ strictly into a
// ClusterTrainingRuntime, keyed by object name.
func loadRuntimes(t *testing.T) map[string]*trainer.ClusterTrainingRuntime {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "runtimes", "*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*trainer.ClusterTrainingRuntime{}
	for _, f := range files {
		name := filepath.Base(f)
		if !isYAML(f) {
			// The local cluster (pkg/localcluster) and the docs apply every
			// runtimes/*.yaml; anything else here is a mistake.
			t.Errorf("runtimes/%s: only runtime YAML files belong in runtimes/", name)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "# ") {
			t.Errorf("runtimes/%s: start the file with a comment saying what the runtime is for", name)
		}
		f, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := decodeDocs("runtimes/"+name, f)
		_ = f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) != 1 {
			t.Errorf("runtimes/%s: want one runtime per file, found %d documents", name, len(docs))
			continue
		}
		d := docs[0]
		if d.apiVersion() != trainer.GroupVersion.String() || d.kind() != trainer.ClusterTrainingRuntimeKind {
			t.Errorf("%s: want %s %s", d, trainer.GroupVersion, trainer.ClusterTrainingRuntimeKind)
			continue
		}
		rt := &trainer.ClusterTrainingRuntime{}
		if err := yaml.UnmarshalStrict(d.json, rt); err != nil {
			t.Errorf("%s: does not decode strictly into ClusterTrainingRuntime: %v", d, err)
			continue
		}
		if want := strings.TrimSuffix(name, filepath.Ext(name)); rt.Name != want {
			t.Errorf("%s: name %q, want %q (the file's name)", d, rt.Name, want)
		}
		if rt.Namespace != "" {
			t.Errorf("%s: a ClusterTrainingRuntime has no namespace, got %q", d, rt.Namespace)
		}
		out[rt.Name] = rt
	}
	return out
}

// TestRuntimesCatalog checks every runtime under runtimes/: that it is a valid
// runtime for Trainyard (pkg/validation, the check of the runtime webhook, with
// no errors and no warnings), that the Kubeflow SDK can list it, and that a
// TrainJob on it builds through the plugin pipeline.
func TestRuntimesCatalog(t *testing.T) {
	rts := loadRuntimes(t)
	var names []string
	for n := range rts {
		names = append(names, n)
	}
	var want []string
	for n := range catalog {
		want = append(want, n)
	}
	slices.Sort(names)
	slices.Sort(want)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("runtimes under runtimes/ (-want +got):\n%s", diff)
	}

	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		rt := rts[name]
		t.Run(name, func(t *testing.T) {
			warnings, errs := validation.ValidateRuntimeSpec(fw, &rt.Spec)
			if len(errs) > 0 {
				t.Errorf("ValidateRuntimeSpec: %v", errs.ToAggregate())
			}
			if len(warnings) > 0 {
				t.Errorf("ValidateRuntimeSpec warnings: %q", warnings)
			}
			if got, want := rt.Labels[trainer.FrameworkLabel], catalog[name]; got != want {
				t.Errorf("label %s=%q, want %q", trainer.FrameworkLabel, got, want)
			}
			checkSDKListable(t, rt)

			// Every container image is pinned to a tag (or digest).
			for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
				ps := rj.Template.Spec.Template.Spec
				for _, c := range slices.Concat(ps.InitContainers, ps.Containers) {
					img := c.Image
					if i := strings.LastIndex(img, "/"); i >= 0 {
						img = img[i+1:]
					}
					if !strings.Contains(img, ":") && !strings.Contains(img, "@") || strings.HasSuffix(img, ":latest") {
						t.Errorf("replicated job %s, container %s: image %q must be pinned to a version", rj.Name, c.Name, c.Image)
					}
				}
			}

			job := sampleTrainJob(name, 2)
			js := build(t, fw, rt, job)
			if slices.Contains(mpiFrameworks, catalog[name]) {
				checkMPIRuntime(t, rt, js)
				return
			}
			node := jobSetContainer(t, js, "node", trainer.NodeContainer)
			rj := replicatedJob(t, js, "node")
			if got := ptr.Deref(rj.Template.Spec.Parallelism, 0); got != 2 {
				t.Errorf("node job parallelism %d, want the TrainJob's 2 nodes", got)
			}
			if got := envValue(node, "EPOCHS"); got != "3" {
				t.Errorf("EPOCHS=%q on the node container, want the TrainJob's 3", got)
			}
			if node.Image != "registry.example.com/team/train:v1" {
				t.Errorf("node image %q, want the TrainJob's", node.Image)
			}

			switch catalog[name] {
			case "torch":
				if rt.Spec.MLPolicy == nil || rt.Spec.MLPolicy.Torch == nil {
					t.Fatal("a torch runtime needs mlPolicy.torch")
				}
				if got := envValue(node, "PET_NNODES"); got != "2" {
					t.Errorf("PET_NNODES=%q, want 2", got)
				}
				if got := envValue(node, "PET_MASTER_ADDR"); got != job.Name+"-node-0-0."+job.Name {
					t.Errorf("PET_MASTER_ADDR=%q", got)
				}
			case "jax":
				if got := envValue(node, "JAX_COORDINATOR_ADDRESS"); got != job.Name+"-node-0-0."+job.Name+":29500" {
					t.Errorf("JAX_COORDINATOR_ADDRESS=%q", got)
				}
			case "xgboost":
				if got := envValue(node, "DMLC_NUM_WORKER"); got != "2" {
					t.Errorf("DMLC_NUM_WORKER=%q, want 2", got)
				}
			case "flux":
				if len(node.Command) != 3 || node.Command[1] != "/etc/flux-config/entrypoint.sh" || node.Command[2] != "python train.py" {
					t.Errorf("node command %q, want the Flux entrypoint wrapping the TrainJob's", node.Command)
				}
			case "torchtune":
				// The torchtune runtimes run after both initializers, on a shared claim.
				if got := replicatedJob(t, js, "node").DependsOn; len(got) != 2 {
					t.Errorf("node dependsOn %v, want both initializers", got)
				}
				if len(js.Spec.VolumeClaimPolicies) != 1 {
					t.Errorf("volumeClaimPolicies %v, want the initializer claim", js.Spec.VolumeClaimPolicies)
				}
			case "plainml":
				if mp := rt.Spec.MLPolicy; mp == nil || mp.NumNodes == nil ||
					mp.Torch != nil || mp.MPI != nil || mp.JAX != nil || mp.XGBoost != nil || mp.Flux != nil {
					t.Errorf("a plain runtime has mlPolicy.numNodes and no framework policy, got %+v", mp)
				}
				for _, e := range node.Env {
					if strings.HasPrefix(e.Name, "PET_") {
						t.Errorf("plain runtime: unexpected framework variable %s", e.Name)
					}
				}
			}
		})
	}
}

// checkMPIRuntime: the launcher runs the TrainJob's program with the hostfile
// and OpenMPI's settings, after the nodes are Ready, and decides success; the
// node job keeps the runtime's sshd and is sized from numNodes (the launcher
// counts as a node when it runs ranks).
func checkMPIRuntime(t *testing.T, rt *trainer.ClusterTrainingRuntime, js *jobsetv1alpha2.JobSet) {
	t.Helper()
	mp := rt.Spec.MLPolicy
	if mp == nil || mp.MPI == nil {
		t.Fatal("an MPI runtime needs mlPolicy.mpi")
	}
	launcher := jobSetContainer(t, js, "launcher", trainer.NodeContainer)
	if launcher.Image != "registry.example.com/team/train:v1" {
		t.Errorf("launcher image %q, want the TrainJob's", launcher.Image)
	}
	if got := envValue(launcher, "EPOCHS"); got != "3" {
		t.Errorf("EPOCHS=%q on the launcher, want the TrainJob's 3", got)
	}
	for _, name := range []string{"OMPI_MCA_orte_default_hostfile", "PRTE_MCA_prte_default_hostfile"} { // Open MPI 4 and 5
		if got := envValue(launcher, name); got != "/etc/mpi/hostfile" {
			t.Errorf("%s=%q", name, got)
		}
	}
	// Kubeflow Trainer v2.4: the TrainJob's image on the node pods too, which
	// keep the runtime's command (the SSH server).
	node := jobSetContainer(t, js, "node", trainer.NodeContainer)
	var runtimeNode []string
	for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
		if rj.Name == "node" {
			runtimeNode = rj.Template.Spec.Template.Spec.Containers[0].Command
		}
	}
	if len(node.Command) == 0 || !slices.Equal(node.Command, runtimeNode) || node.Image != launcher.Image {
		t.Errorf("node container %q %q: want the TrainJob's image and the runtime's sshd command %q", node.Image, node.Command, runtimeNode)
	}
	wantNodes := int32(2)
	if ptr.Deref(mp.MPI.RunLauncherAsNode, false) {
		wantNodes = 1
	}
	if got := ptr.Deref(replicatedJob(t, js, "node").Template.Spec.Parallelism, 0); got != wantNodes {
		t.Errorf("node job parallelism %d, want %d", got, wantNodes)
	}
	l := replicatedJob(t, js, "launcher")
	if diff := cmp.Diff([]jobsetv1alpha2.DependsOn{{Name: "node", Status: jobsetv1alpha2.DependencyReady}}, l.DependsOn); diff != "" {
		t.Errorf("launcher dependsOn (-want +got):\n%s", diff)
	}
	if sp := js.Spec.SuccessPolicy; sp == nil || !slices.Equal(sp.TargetReplicatedJobs, []string{"launcher"}) {
		t.Errorf("successPolicy %+v, want the launcher's success", sp)
	}
}

// TestRuntimeGPU checks that torch-distributed-gpu asks for a GPU per node in
// the node container's limits, so that numProcPerNode "auto" gives one process
// per GPU, and that a TrainJob's GPU count replaces it.
func TestRuntimeGPU(t *testing.T) {
	rt := loadRuntimes(t)["torch-distributed-gpu"]
	if rt == nil {
		t.Fatal("runtimes/torch-distributed-gpu.yaml is missing")
	}
	c := runtimeContainer(t, rt, trainer.AncestorTrainer, trainer.NodeContainer)
	if q, ok := c.Resources.Limits[gpuResource]; !ok || q.Value() < 1 {
		t.Errorf("node container limits %v: want %s of at least 1", c.Resources.Limits, gpuResource)
	}
	if p := rt.Spec.MLPolicy.Torch.NumProcPerNode; p != nil && p.String() != "auto" {
		t.Errorf("torch.numProcPerNode %s; leave it unset (auto) so that it follows the GPU count", p.String())
	}
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		res  *corev1.ResourceRequirements
		want string
	}{
		{"runtime's GPU", nil, c.Resources.Limits.Name(gpuResource, resource.DecimalSI).String()},
		{"TrainJob asks for 4 GPUs", &corev1.ResourceRequirements{Limits: corev1.ResourceList{gpuResource: resource.MustParse("4")}}, "4"},
		{"TrainJob asks for 8 GPUs and 16 CPUs", &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")},
			Limits:   corev1.ResourceList{gpuResource: resource.MustParse("8")},
		}, "8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := sampleTrainJob(rt.Name, 2)
			job.Spec.Trainer.ResourcesPerNode = tc.res
			node := jobSetContainer(t, build(t, fw, rt, job), "node", trainer.NodeContainer)
			if got := envValue(node, "PET_NPROC_PER_NODE"); got != tc.want {
				t.Errorf("PET_NPROC_PER_NODE=%q, want %q", got, tc.want)
			}
		})
	}
	ps := replicatedJobOf(t, rt, trainer.AncestorTrainer).Template.Spec.Template.Spec
	if !slices.ContainsFunc(ps.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == string(gpuResource) && tol.Operator == corev1.TolerationOpExists
	}) {
		t.Errorf("node pods do not tolerate the %s taint of GPU nodes: %v", gpuResource, ps.Tolerations)
	}
}

// TestRuntimeWithDataset checks torch-distributed-with-dataset: a
// dataset-initializer job that gets the TrainJob's storage URI, a volume that
// JobSet creates per TrainJob and both jobs mount, and the nodes waiting for
// the initializer to complete.
func TestRuntimeWithDataset(t *testing.T) {
	rt := loadRuntimes(t)["torch-distributed-with-dataset"]
	if rt == nil {
		t.Fatal("runtimes/torch-distributed-with-dataset.yaml is missing")
	}
	spec := rt.Spec.Template.Spec
	if len(spec.ReplicatedJobs) != 2 {
		t.Fatalf("want 2 replicated jobs (dataset-initializer, node), found %d", len(spec.ReplicatedJobs))
	}
	ini, node := spec.ReplicatedJobs[0], spec.ReplicatedJobs[1]
	if got := ini.Template.Labels[trainer.AncestorLabel]; ini.Name != "dataset-initializer" || got != trainer.AncestorDatasetInitializer {
		t.Errorf("first replicated job %q labelled %s=%q, want dataset-initializer labelled %s", ini.Name, trainer.AncestorLabel, got, trainer.AncestorDatasetInitializer)
	}
	if len(ini.DependsOn) > 0 {
		t.Errorf("JobSet does not allow dependsOn on the first replicated job")
	}
	// JobSet v0.11 supports one dependency per replicated job.
	if diff := cmp.Diff([]jobsetv1alpha2.DependsOn{{Name: ini.Name, Status: jobsetv1alpha2.DependencyComplete}}, node.DependsOn); diff != "" {
		t.Errorf("node dependsOn (-want +got):\n%s", diff)
	}

	// The shared volume: a claim template that JobSet turns into one PVC per
	// JobSet and adds to every pod that mounts it. The pod templates must not
	// declare a volume of that name themselves.
	if len(spec.VolumeClaimPolicies) != 1 || len(spec.VolumeClaimPolicies[0].Templates) != 1 {
		t.Fatalf("want one volumeClaimPolicies template, got %+v", spec.VolumeClaimPolicies)
	}
	claim := spec.VolumeClaimPolicies[0].Templates[0]
	if claim.Name != "initializer" {
		t.Errorf("claim template %q, want initializer (the volume name Kubeflow runtimes use for initializers)", claim.Name)
	}
	if _, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; !ok {
		t.Errorf("claim template %s requests no storage", claim.Name)
	}
	mounts := map[string]string{}
	for _, rj := range spec.ReplicatedJobs {
		ps := rj.Template.Spec.Template.Spec
		for _, v := range ps.Volumes {
			if v.Name == claim.Name {
				t.Errorf("replicated job %s declares volume %s, which JobSet adds from volumeClaimPolicies", rj.Name, v.Name)
			}
		}
		for _, c := range ps.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == claim.Name {
					mounts[rj.Name+"/"+c.Name] = m.MountPath
				}
			}
		}
	}
	if diff := cmp.Diff(map[string]string{"dataset-initializer/dataset-initializer": "/workspace", "node/node": "/workspace"}, mounts); diff != "" {
		t.Errorf("mounts of the shared volume (-want +got):\n%s", diff)
	}

	// A TrainJob's dataset settings reach the initializer container.
	fw, err := plugins.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	job := sampleTrainJob(rt.Name, 2)
	job.Spec.Initializer = &trainer.Initializer{Dataset: &trainer.DatasetInitializer{
		StorageUri: ptr.To("hf://tatsu-lab/alpaca"),
		Env:        []corev1.EnvVar{{Name: "SPLIT", Value: "train"}},
		SecretRef:  &corev1.LocalObjectReference{Name: "hf-token"},
	}}
	js := build(t, fw, rt, job)
	c := jobSetContainer(t, js, "dataset-initializer", trainer.DatasetInitializerContainer)
	if got := envValue(c, initializer.StorageURIEnv); got != "hf://tatsu-lab/alpaca" {
		t.Errorf("%s=%q on the initializer, want the TrainJob's storageUri", initializer.StorageURIEnv, got)
	}
	if got := envValue(c, "SPLIT"); got != "train" {
		t.Errorf("SPLIT=%q on the initializer, want the TrainJob's initializer env", got)
	}
	if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil && e.SecretRef.Name == "hf-token" }) {
		t.Errorf("initializer envFrom %v lacks the TrainJob's secretRef", c.EnvFrom)
	}
	if diff := cmp.Diff(spec.VolumeClaimPolicies, js.Spec.VolumeClaimPolicies); diff != "" {
		t.Errorf("volumeClaimPolicies of the JobSet (-runtime +jobset):\n%s", diff)
	}
	if got := replicatedJob(t, js, "node").DependsOn; len(got) != 1 || got[0].Status != jobsetv1alpha2.DependencyComplete {
		t.Errorf("the JobSet's node job dependsOn %v, want the initializer Complete", got)
	}
}

// checkSDKListable checks what the Kubeflow SDK needs to list a runtime and
// describe its trainer: the framework label, a replicated job with the ancestor
// label and a "node" container with an image, and node resource limits (if
// any) that name the device: the SDK fails on limits without a GPU, TPU or
// CPU entry.
func checkSDKListable(t *testing.T, rt *trainer.ClusterTrainingRuntime) {
	t.Helper()
	if rt.Labels[trainer.FrameworkLabel] == "" {
		t.Errorf("no %s label: the Kubeflow SDK skips runtimes without it", trainer.FrameworkLabel)
	}
	c := runtimeContainer(t, rt, trainer.AncestorTrainer, trainer.NodeContainer)
	if c.Image == "" {
		t.Errorf("the node container has no image")
	}
	if lim := c.Resources.Limits; len(lim) > 0 {
		if _, gpu := lim[gpuResource]; !gpu {
			if _, cpu := lim[corev1.ResourceCPU]; !cpu {
				if _, tpu := lim["google.com/tpu"]; !tpu {
					t.Errorf("node limits %v name no device (nvidia.com/gpu, google.com/tpu or cpu); the Kubeflow SDK cannot describe the runtime", lim)
				}
			}
		}
	}
}

// sampleTrainJob is a TrainJob on a ClusterTrainingRuntime with its own image
// and an env variable.
func sampleTrainJob(runtimeName string, nodes int32) *trainer.TrainJob {
	return &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: "sample", Namespace: "team-a"},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: runtimeName},
			Trainer: &trainer.Trainer{
				NumNodes: ptr.To(nodes),
				Image:    ptr.To("registry.example.com/team/train:v1"),
				Command:  []string{"python", "train.py"},
				Env:      []corev1.EnvVar{{Name: "EPOCHS", Value: "3"}},
			},
		},
	}
}

// build validates a TrainJob against a runtime as the webhooks do and runs the
// plugin pipeline; it returns the one JobSet.
func build(t *testing.T, fw *framework.Framework, rt *trainer.ClusterTrainingRuntime, job *trainer.TrainJob) *jobsetv1alpha2.JobSet {
	t.Helper()
	r := runtime.FromClusterTrainingRuntime(rt)
	if errs := validation.ValidateTrainJob(nil, job); len(errs) > 0 {
		t.Fatalf("ValidateTrainJob: %v", errs.ToAggregate())
	}
	if errs := validation.ValidateAgainstRuntime(fw, r, job); len(errs) > 0 {
		t.Fatalf("ValidateAgainstRuntime: %v", errs.ToAggregate())
	}
	built, err := fw.Build(runtime.TrainJobRequest(job), r)
	objs := built.Objects()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var out *jobsetv1alpha2.JobSet
	for _, o := range objs {
		if js, ok := o.(*jobsetv1alpha2.JobSet); ok {
			if out != nil {
				t.Fatal("Build returned more than one JobSet")
			}
			out = js
		}
	}
	if out == nil {
		t.Fatalf("Build returned no JobSet: %v", objs)
	}
	if out.Name != job.Name || out.Namespace != job.Namespace {
		t.Errorf("JobSet %s/%s, want %s/%s", out.Namespace, out.Name, job.Namespace, job.Name)
	}
	return out
}

func replicatedJob(t *testing.T, js *jobsetv1alpha2.JobSet, name string) *jobsetv1alpha2.ReplicatedJob {
	t.Helper()
	for i := range js.Spec.ReplicatedJobs {
		if js.Spec.ReplicatedJobs[i].Name == name {
			return &js.Spec.ReplicatedJobs[i]
		}
	}
	t.Fatalf("JobSet %s has no replicated job %q", js.Name, name)
	return nil
}

func jobSetContainer(t *testing.T, js *jobsetv1alpha2.JobSet, rjob, container string) corev1.Container {
	t.Helper()
	for _, c := range replicatedJob(t, js, rjob).Template.Spec.Template.Spec.Containers {
		if c.Name == container {
			return c
		}
	}
	t.Fatalf("JobSet %s: replicated job %s has no container %q", js.Name, rjob, container)
	return corev1.Container{}
}

// replicatedJobOf returns the runtime's replicated job with the given ancestor label.
func replicatedJobOf(t *testing.T, rt *trainer.ClusterTrainingRuntime, ancestor string) jobsetv1alpha2.ReplicatedJob {
	t.Helper()
	for _, rj := range rt.Spec.Template.Spec.ReplicatedJobs {
		if rj.Template.Labels[trainer.AncestorLabel] == ancestor {
			return rj
		}
	}
	t.Fatalf("runtime %s has no replicated job labelled %s=%s", rt.Name, trainer.AncestorLabel, ancestor)
	return jobsetv1alpha2.ReplicatedJob{}
}

func runtimeContainer(t *testing.T, rt *trainer.ClusterTrainingRuntime, ancestor, name string) corev1.Container {
	t.Helper()
	for _, c := range replicatedJobOf(t, rt, ancestor).Template.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("runtime %s: the %s job has no container %q", rt.Name, ancestor, name)
	return corev1.Container{}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
