package xgboostjob

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// iris is v1's example XGBoostJob: a Master with port 9991 and 2 workers.
func iris(mutate ...func(*kubeflowv1.XGBoostJob)) *kubeflowv1.XGBoostJob {
	spec := func(n int32) *kubeflowv1.ReplicaSpec {
		return &kubeflowv1.ReplicaSpec{Replicas: ptr.To(n), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "xgboost", Image: "xgb:1", Env: []corev1.EnvVar{{Name: "OWN", Value: "1"}},
				Ports: []corev1.ContainerPort{{Name: "xgboostjob-port", ContainerPort: 9991}}}}}}}
	}
	j := &kubeflowv1.XGBoostJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "iris"},
		Spec: kubeflowv1.XGBoostJobSpec{XGBReplicaSpecs: map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec{
			kubeflowv1.XGBoostJobReplicaTypeMaster: spec(1),
			kubeflowv1.XGBoostJobReplicaTypeWorker: spec(2),
		}},
	}
	for _, m := range mutate {
		m(j)
	}
	return j
}

func envOf(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

// TestEnv: v1's names, order and values on every replica, ranks offset by
// the Master, and the workers' addresses.
func TestEnv(t *testing.T) {
	fw, err := Def.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Def.Build(fw, Def.Defaulted(iris()), "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	var hosts []string
	for _, rj := range p.JobSet().Spec.ReplicatedJobs {
		got[rj.Name] = envOf(rj.Template.Spec.Template.Spec.Containers[0])
		hosts = append(hosts, rj.Template.Spec.Template.Spec.Hostname)
	}
	common := func(rank string) []string {
		return []string{"OWN=1", "MASTER_PORT=9991", "MASTER_ADDR=iris-master-0", "WORLD_SIZE=3", "RANK=" + rank,
			"PYTHONUNBUFFERED=1", "WORKER_PORT=9991", "WORKER_ADDRS=iris-worker-0,iris-worker-1"}
	}
	want := map[string][]string{"master-0": common("0"), "worker-0": common("1"), "worker-1": common("2")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"iris-master-0", "iris-worker-0", "iris-worker-1"}, hosts); diff != "" {
		t.Errorf("host names (-want +got):\n%s", diff)
	}
	if sp := p.JobSet().Spec.SuccessPolicy; sp == nil || !slices.Equal(sp.TargetReplicatedJobs, []string{"master-0"}) {
		t.Errorf("success policy %+v: want the Master's", sp)
	}
	var svcs []string
	for _, c := range p.Children {
		if svc, ok := c.Object.(*corev1.Service); ok {
			svcs = append(svcs, svc.Name)
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9991 || svc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("Service %s: %+v, want headless on 9991", svc.Name, svc.Spec)
			}
		}
	}
	if diff := cmp.Diff([]string{"iris-master-0", "iris-worker-0", "iris-worker-1"}, svcs); diff != "" {
		t.Errorf("Services (-want +got):\n%s", diff)
	}
}

// A Master alone gets no worker variables; the default port is 9999.
func TestEnvSingle(t *testing.T) {
	j := Def.Defaulted(iris(func(j *kubeflowv1.XGBoostJob) {
		delete(j.Spec.XGBReplicaSpecs, kubeflowv1.XGBoostJobReplicaTypeWorker)
		j.Spec.XGBReplicaSpecs[kubeflowv1.XGBoostJobReplicaTypeMaster].Template.Spec.Containers[0].Ports = nil
	})).(*kubeflowv1.XGBoostJob)
	env, err := Env(j, kubeflowv1.XGBoostJobReplicaTypeMaster, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"MASTER_PORT=9999", "MASTER_ADDR=iris-master-0", "WORLD_SIZE=1", "RANK=0", "PYTHONUNBUFFERED=1"}
	if diff := cmp.Diff(want, envOf(corev1.Container{Env: env})); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		job  *kubeflowv1.XGBoostJob
		want []string
	}{
		"valid": {job: iris()},
		"lower-case keys: valid": {job: iris(func(j *kubeflowv1.XGBoostJob) {
			j.Spec.XGBReplicaSpecs["worker"] = j.Spec.XGBReplicaSpecs["Worker"]
			delete(j.Spec.XGBReplicaSpecs, "Worker")
		})},
		"no master": {
			job:  iris(func(j *kubeflowv1.XGBoostJob) { delete(j.Spec.XGBReplicaSpecs, kubeflowv1.XGBoostJobReplicaTypeMaster) }),
			want: []string{"spec.xgbReplicaSpecs[Master]: Required value: a XGBoostJob must have a Master"},
		},
		"no xgboost container, two masters": {
			job: iris(func(j *kubeflowv1.XGBoostJob) {
				m := j.Spec.XGBReplicaSpecs[kubeflowv1.XGBoostJobReplicaTypeMaster]
				m.Template.Spec.Containers[0].Name = "main"
				m.Replicas = ptr.To[int32](2)
			}),
			want: []string{
				"spec.xgbReplicaSpecs[Master].template.spec.containers: Required value: must have at least one container with name xgboost",
				"spec.xgbReplicaSpecs[Master].replicas: Forbidden: must be 1",
			},
		},
		"bad run policy": {
			job: iris(func(j *kubeflowv1.XGBoostJob) {
				j.Spec.RunPolicy.CleanPodPolicy = ptr.To[kubeflowv1.CleanPodPolicy]("Some")
				j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](-1)
			}),
			want: []string{
				`spec.runPolicy.cleanPodPolicy: Unsupported value: "Some": supported values: "All", "Running", "None"`,
				"spec.runPolicy.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
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
