package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

func quantities(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestParseResources(t *testing.T) {
	cases := []struct {
		in      string
		want    corev1.ResourceList
		wantErr string
	}{
		{in: "", want: nil},
		{in: "cpu=2,memory=4Gi,gpu=1", want: quantities("cpu", "2", "memory", "4Gi", "nvidia.com/gpu", "1")},
		{in: " CPU = 500m , Memory=512Mi ", want: quantities("cpu", "500m", "memory", "512Mi")},
		{in: "storage=10Gi", want: quantities("ephemeral-storage", "10Gi")},
		{in: "mig-1g.5gb=2", want: quantities("nvidia.com/mig-1g.5gb", "2")},
		{in: "amd.com/gpu=1", want: quantities("amd.com/gpu", "1")},
		{in: "nvidia.com/gpu=2", want: quantities("nvidia.com/gpu", "2")},
		{in: "gpu=1,mig-1g.5gb=1", wantErr: "cannot be mixed"},
		{in: "cpu", wantErr: "want NAME=QUANTITY"},
		{in: "cpu=", wantErr: "want NAME=QUANTITY"},
		{in: "=2", wantErr: "want NAME=QUANTITY"},
		{in: "cpu=2,,memory=1Gi", wantErr: "want NAME=QUANTITY"},
		{in: "cpu=two", wantErr: `quantity "two"`},
		{in: "gpu=1,nvidia.com/gpu=2", wantErr: "nvidia.com/gpu given twice"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseResources(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseResources(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseResources(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestParseEnv(t *testing.T) {
	cases := []struct {
		name    string
		in      []string
		want    []corev1.EnvVar
		wantErr bool
	}{
		{name: "none"},
		{name: "in order", in: []string{"B=2", "A=1"}, want: []corev1.EnvVar{{Name: "B", Value: "2"}, {Name: "A", Value: "1"}}},
		{name: "value with = and commas", in: []string{"OPTS=a=1,b=2"}, want: []corev1.EnvVar{{Name: "OPTS", Value: "a=1,b=2"}}},
		{name: "empty value", in: []string{"EMPTY="}, want: []corev1.EnvVar{{Name: "EMPTY"}}},
		{name: "later wins in place", in: []string{"A=1", "B=2", "A=3"}, want: []corev1.EnvVar{{Name: "A", Value: "3"}, {Name: "B", Value: "2"}}},
		{name: "no =", in: []string{"A"}, wantErr: true},
		{name: "no name", in: []string{"=1"}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnv(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseEnv(%q) error = %v, want error: %v", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseEnv(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestNewTrainJob(t *testing.T) {
	typeMeta := metav1.TypeMeta{APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob"}
	cluster := Runtime{Name: "torch-distributed", Kind: trainer.ClusterTrainingRuntimeKind}
	res := quantities("cpu", "2", "nvidia.com/gpu", "1")
	cases := []struct {
		name string
		opts TrainOptions
		want *trainer.TrainJob
	}{
		{
			name: "nothing asked: no trainer, cluster runtime by name only",
			opts: TrainOptions{Name: "a", Namespace: "ns", Runtime: cluster},
			want: &trainer.TrainJob{TypeMeta: typeMeta, ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"},
				Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}}},
		},
		{
			name: "everything: requests equal limits, queue label",
			opts: TrainOptions{Name: "b", Namespace: "ns", Runtime: cluster, NumNodes: 2, Resources: res,
				Env: []corev1.EnvVar{{Name: "K", Value: "V"}}, Queue: "q", Image: "img:1", Command: []string{"torchrun", "x.py"}},
			want: &trainer.TrainJob{TypeMeta: typeMeta,
				ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", Labels: map[string]string{"kueue.x-k8s.io/queue-name": "q"}},
				Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}, Trainer: &trainer.Trainer{
					Image: ptr.To("img:1"), Command: []string{"torchrun", "x.py"}, Env: []corev1.EnvVar{{Name: "K", Value: "V"}},
					NumNodes:         ptr.To[int32](2),
					ResourcesPerNode: &corev1.ResourceRequirements{Requests: res, Limits: res},
				}}},
		},
		{
			name: "a deadline, as the SDK 0.5's ActiveDeadlineSeconds option sets it",
			opts: TrainOptions{Name: "d", Namespace: "ns", Runtime: cluster, ActiveDeadlineSeconds: 600},
			want: &trainer.TrainJob{TypeMeta: typeMeta, ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns"},
				Spec: trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"}, ActiveDeadlineSeconds: ptr.To[int64](600)}},
		},
		{
			name: "namespaced runtime: kind and group",
			opts: TrainOptions{Name: "c", Namespace: "ns", Runtime: Runtime{Name: "mine", Kind: trainer.TrainingRuntimeKind, Namespace: "ns"}, NumNodes: 3},
			want: &trainer.TrainJob{TypeMeta: typeMeta, ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"},
				Spec: trainer.TrainJobSpec{
					RuntimeRef: trainer.RuntimeRef{Name: "mine", APIGroup: ptr.To("trainer.kubeflow.org"), Kind: ptr.To("TrainingRuntime")},
					Trainer:    &trainer.Trainer{NumNodes: ptr.To[int32](3)},
				}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, NewTrainJob(tc.opts)); diff != "" {
				t.Errorf("NewTrainJob (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRandomName(t *testing.T) {
	re := regexp.MustCompile(`^[a-z][0-9a-f]{11}$`)
	seen := map[string]bool{}
	for i := 0; i < 200; i++ {
		n, err := RandomName()
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(n) {
			t.Fatalf("RandomName() = %q, want a letter and 11 hex digits", n)
		}
		if seen[n] {
			t.Fatalf("RandomName() repeated %q", n)
		}
		seen[n] = true
	}
}
