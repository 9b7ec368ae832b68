package jobframework

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/trainyard/trainyard/pkg/observe"
)

func workloadOf(name, jobUID string) *kueue.Workload {
	w := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name}}
	if jobUID != "" {
		w.Labels = map[string]string{jobUIDLabel: jobUID}
	}
	return w
}

// seen is a summary of an Observed: child keys, pod names, workload names.
type seen struct {
	Children, Pods, Workloads []string
	KueueServed               bool
}

func summarize(o *observe.Observed) seen {
	var s seen
	for k := range o.Children {
		s.Children = append(s.Children, k.String())
	}
	sort.Strings(s.Children)
	for _, p := range o.Pods {
		s.Pods = append(s.Pods, p.Name)
	}
	for _, w := range o.Workloads {
		s.Workloads = append(s.Workloads, w.Name)
	}
	s.KueueServed = o.KueueServed
	return s
}

func TestObserve(t *testing.T) {
	js := &jobsetv1alpha2.JobSet{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "job", UID: "js-uid", OwnerReferences: controlledBy("job-uid", "job")}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "ssh", OwnerReferences: controlledBy("job-uid", "job")}}
	otherNS := configMapOf("hosts-elsewhere", "job-uid")
	otherNS.Namespace = "other"
	objs := []client.Object{
		configMapOf("hosts", "job-uid"),
		configMapOf("b-hosts", "job-uid"),
		configMapOf("not-ours", "other-uid"),
		configMapOf("no-owner", ""),
		otherNS,
		secret,
		js,
		// Pods come back sorted by name.
		podOf("job-node-0-1", "job", corev1.PodRunning),
		podOf("job-node-0-0", "job", corev1.PodRunning),
		podOf("other-node-0-0", "other", corev1.PodRunning),
		podOf("stray", "", corev1.PodRunning),
		workloadOf("wl-job", "job-uid"),
		workloadOf("wl-jobset", "js-uid"),
		workloadOf("wl-other", "other-uid"),
	}
	cases := map[string]struct {
		kinds []schema.GroupVersionKind
		kueue bool
		objs  []client.Object
		want  seen
	}{
		"children of the configured kinds, pods by JobSet name, no Kueue": {
			kinds: []schema.GroupVersionKind{configMapGVK, jobSetGVK},
			objs:  objs,
			want: seen{
				Children: []string{"ConfigMap/b-hosts", "ConfigMap/hosts", "JobSet.jobset.x-k8s.io/job"},
				Pods:     []string{"job-node-0-0", "job-node-0-1"},
			},
		},
		"every kind": {
			kinds: []schema.GroupVersionKind{configMapGVK, secretGVK, jobSetGVK},
			objs:  objs,
			want: seen{
				Children: []string{"ConfigMap/b-hosts", "ConfigMap/hosts", "JobSet.jobset.x-k8s.io/job", "Secret/ssh"},
				Pods:     []string{"job-node-0-0", "job-node-0-1"},
			},
		},
		"Kueue: Workloads of the job and of its JobSet": {
			kinds: []schema.GroupVersionKind{jobSetGVK},
			kueue: true,
			objs:  objs,
			want: seen{
				Children:    []string{"JobSet.jobset.x-k8s.io/job"},
				Pods:        []string{"job-node-0-0", "job-node-0-1"},
				Workloads:   []string{"wl-job", "wl-jobset"},
				KueueServed: true,
			},
		},
		"Kueue, JobSet kind not observed: only the job's Workloads": {
			kueue: true,
			objs:  objs,
			want: seen{
				Pods:        []string{"job-node-0-0", "job-node-0-1"},
				Workloads:   []string{"wl-job"},
				KueueServed: true,
			},
		},
		"a CRD kind the scheme does not know, listed unstructured": {
			kinds: []schema.GroupVersionKind{thingGVK, jobSetGVK},
			objs:  append([]client.Object{thing("job-uid")}, objs...),
			want: seen{
				Children: []string{"JobSet.jobset.x-k8s.io/job", "Thing.x.io/thing"},
				Pods:     []string{"job-node-0-0", "job-node-0-1"},
			},
		},
		"a CRD kind, someone else's object": {
			kinds: []schema.GroupVersionKind{thingGVK},
			objs:  []client.Object{thing("other-uid")},
			want:  seen{},
		},
		"nothing there": {
			kinds: []schema.GroupVersionKind{configMapGVK, jobSetGVK},
			kueue: true,
			want:  seen{KueueServed: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, &fakeAdapter{}, fixtureOpts{objs: tc.objs, kinds: tc.kinds, kueue: tc.kueue})
			obs, err := f.r.observe(context.Background(), trainJob())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summarize(obs)); diff != "" {
				t.Errorf("observed (-want +got):\n%s", diff)
			}
			if tc.kueue {
				return
			}
			// The observed JobSet is the cluster's object.
			for _, gvk := range tc.kinds {
				if gvk == jobSetGVK && len(tc.objs) > 0 {
					if got := obs.JobSet("job"); got == nil || got.UID != "js-uid" {
						t.Errorf("observed JobSet = %v, want UID js-uid", got)
					}
				}
			}
		})
	}
}

func TestObserveErrors(t *testing.T) {
	failList := func(kind string) interceptor.Funcs {
		return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if strings.Contains(strings.ToLower(typeName(list)), kind) {
				return errBoom
			}
			return c.List(ctx, list, opts...)
		}}
	}
	cases := map[string]struct {
		kinds   []schema.GroupVersionKind
		funcs   interceptor.Funcs
		wantErr string
		wantIs  error
	}{
		"children": {
			kinds:   []schema.GroupVersionKind{configMapGVK},
			funcs:   failList("configmap"),
			wantErr: "listing children of TrainJob job",
			wantIs:  errBoom,
		},
		"pods": {
			funcs:   failList("pod"),
			wantErr: "listing pods of TrainJob job",
			wantIs:  errBoom,
		},
		"workloads": {
			funcs:   failList("workload"),
			wantErr: "listing Kueue workloads",
			wantIs:  errBoom,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, &fakeAdapter{}, fixtureOpts{kinds: tc.kinds, kueue: true, funcs: tc.funcs})
			_, err := f.r.observe(context.Background(), trainJob())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("observe error %v, want %q", err, tc.wantErr)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("observe error %v, want one wrapping %v", err, tc.wantIs)
			}
		})
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *corev1.ConfigMapList:
		return "ConfigMapList"
	case *corev1.PodList:
		return "PodList"
	case *kueue.WorkloadList:
		return "WorkloadList"
	}
	return ""
}

func TestIndexFuncs(t *testing.T) {
	withLabels := func(l map[string]string) client.Object {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: l}}
	}
	cases := map[string]struct {
		fn   client.IndexerFunc
		obj  client.Object
		want []string
	}{
		"controller UID":                 {controllerUID, configMapOf("a", "u1"), []string{"u1"}},
		"no controller":                  {controllerUID, configMapOf("a", ""), nil},
		"JobSet name":                    {jobSetName, podOf("p", "job", corev1.PodRunning), []string{"job"}},
		"no JobSet name":                 {jobSetName, withLabels(nil), nil},
		"Workload job UID":               {workloadJobUID, workloadOf("w", "u1"), []string{"u1"}},
		"Workload without job UID":       {workloadJobUID, workloadOf("w", ""), nil},
		"empty label value: not indexed": {jobSetName, withLabels(map[string]string{jobsetv1alpha2.JobSetNameKey: ""}), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.fn(tc.obj)); diff != "" {
				t.Errorf("index (-want +got):\n%s", diff)
			}
		})
	}
	// A non-controller owner reference is not indexed.
	cm := configMapOf("a", "u1")
	cm.OwnerReferences[0].Controller = nil
	if got := controllerUID(cm); got != nil {
		t.Errorf("controllerUID of a non-controller owner = %v, want nil", got)
	}
}
