package runtime_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/runtime"
	rtt "github.com/trainyard/trainyard/test/util/rtt"
)

func TestResolve(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	if err := trainer.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	specWith := func(image string) trainer.TrainingRuntimeSpec {
		w := rtt.MakeTorchRuntime("x")
		w.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = image
		return w.Obj().Spec
	}
	objs := []client.Object{
		&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch"}, Spec: specWith("cluster")},
		&trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch", Namespace: "team-a"}, Spec: specWith("team-a")},
		&trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "only-b", Namespace: "team-b"}, Spec: specWith("team-b")},
	}
	errAPI := errors.New("apiserver unavailable")
	cases := map[string]struct {
		job       *trainer.TrainJob
		get       func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
		wantKind  string
		wantImage string
		wantIs    error
		wantNotIs []error
		wantMsg   string
	}{
		"ClusterTrainingRuntime by default": {
			job:       rtt.MakeTrainJob("team-a", "job").RuntimeRef("", "torch").Obj(),
			wantKind:  "ClusterTrainingRuntime",
			wantImage: "cluster",
		},
		"TrainingRuntime in the TrainJob's namespace": {
			job:       rtt.MakeTrainJob("team-a", "job").RuntimeRef("TrainingRuntime", "torch").Obj(),
			wantKind:  "TrainingRuntime",
			wantImage: "team-a",
		},
		"a TrainingRuntime of another namespace is not found": {
			job:     rtt.MakeTrainJob("team-a", "job").RuntimeRef("TrainingRuntime", "only-b").Obj(),
			wantIs:  runtime.ErrNotFound,
			wantMsg: `"team-a/only-b"`,
		},
		"missing ClusterTrainingRuntime": {
			job:     rtt.MakeTrainJob("team-a", "job").RuntimeRef("", "nope").Obj(),
			wantIs:  runtime.ErrNotFound,
			wantMsg: "spec.runtimeRef",
		},
		"unsupported kind": {
			job: func() *trainer.TrainJob {
				j := rtt.MakeTrainJob("team-a", "job").Obj()
				j.Spec.RuntimeRef.Kind = ptr.To("MPIJob")
				return j
			}(),
			wantIs: runtime.ErrUnsupported,
		},
		"another API error is neither not-found nor unsupported": {
			job: rtt.MakeTrainJob("team-a", "job").RuntimeRef("", "torch").Obj(),
			get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return errAPI
			},
			wantIs:    errAPI,
			wantNotIs: []error{runtime.ErrNotFound, runtime.ErrUnsupported},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)
			if tc.get != nil {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: tc.get})
			}
			rt, err := runtime.Resolve(context.Background(), b.Build(), tc.job)
			if tc.wantIs != nil {
				if !errors.Is(err, tc.wantIs) {
					t.Fatalf("Resolve error = %v, want one wrapping %v", err, tc.wantIs)
				}
				for _, not := range tc.wantNotIs {
					if errors.Is(err, not) {
						t.Errorf("Resolve error %v wraps %v", err, not)
					}
				}
				if !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("error %q does not contain %q", err, tc.wantMsg)
				}
				if rt != nil {
					t.Errorf("Resolve returned a runtime with an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			got := struct{ Kind, Name, Image string }{rt.Kind, rt.Name, rt.Spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image}
			want := struct{ Kind, Name, Image string }{tc.wantKind, tc.job.Spec.RuntimeRef.Name, tc.wantImage}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("runtime (-want +got):\n%s", diff)
			}
		})
	}
}
