package harness

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Resources the harness watches.
var (
	JobSets   = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	TrainJobs = schema.GroupVersionResource{Group: "trainer.kubeflow.org", Version: "v1alpha1", Resource: "trainjobs"}
)

// Seen is what a Watcher recorded about one object.
type Seen struct {
	First   time.Time   // first time it was seen
	Running time.Time   // first time seen with spec.suspend not true (zero: never)
	UIDs    []types.UID // every distinct UID seen under the name, in order
	// Phases is every distinct value of status.phase seen, in order, and
	// Conditions every condition type seen True, in the order they became True.
	Phases     []string
	Conditions []string
	// Regressions lists condition types seen True and later not True.
	Regressions []string
	Finished    time.Time // first time Complete or Failed was seen True
	Final       string    // "Complete" or "Failed" once finished
}

// Watcher records, with the local clock, when objects of one resource in one
// namespace appear and change. It keeps watching across API server restarts
// (the informer lists again).
type Watcher struct {
	mu      sync.Mutex
	objs    map[string]*Seen
	changed chan struct{}
	synced  cache.InformerSynced
}

// Watch starts a Watcher until ctx ends.
func Watch(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource, namespace string) (*Watcher, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, namespace, nil)
	inf := f.ForResource(gvr).Informer()
	w := &Watcher{objs: map[string]*Seen{}, changed: make(chan struct{}, 1)}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.observe(o) },
		UpdateFunc: func(_, o any) { w.observe(o) },
	}); err != nil {
		return nil, err
	}
	w.synced = inf.HasSynced
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, ctx.Err()
	}
	return w, nil
}

func (w *Watcher) observe(o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.objs[u.GetName()]
	if s == nil {
		s = &Seen{First: now}
		w.objs[u.GetName()] = s
	}
	if n := len(s.UIDs); n == 0 || s.UIDs[n-1] != u.GetUID() {
		s.UIDs = append(s.UIDs, u.GetUID())
	}
	if susp, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); !susp && s.Running.IsZero() {
		s.Running = now
	}
	if p, _, _ := unstructured.NestedString(u.Object, "status", "phase"); p != "" {
		if n := len(s.Phases); n == 0 || s.Phases[n-1] != p {
			s.Phases = append(s.Phases, p)
		}
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	trueNow := map[string]bool{}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		if st, _ := m["status"].(string); st == "True" {
			trueNow[typ] = true
		}
	}
	for _, typ := range s.Conditions {
		if !trueNow[typ] && !contains(s.Regressions, typ) {
			s.Regressions = append(s.Regressions, typ)
		}
	}
	for typ := range trueNow {
		if !contains(s.Conditions, typ) {
			s.Conditions = append(s.Conditions, typ)
		}
	}
	if s.Finished.IsZero() {
		for _, f := range []string{"Complete", "Completed", "Failed"} {
			if trueNow[f] {
				s.Finished, s.Final = now, f
			}
		}
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Get returns a copy of what was seen of name.
func (w *Watcher) Get(name string) (Seen, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.objs[name]
	if !ok {
		return Seen{}, false
	}
	return *s, true
}

// Count returns how many of names satisfy pred.
func (w *Watcher) Count(names []string, pred func(*Seen) bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, name := range names {
		if s, ok := w.objs[name]; ok && pred(s) {
			n++
		}
	}
	return n
}

// WaitFor waits until pred holds for every name, or ctx ends; it returns how
// many did.
func (w *Watcher) WaitFor(ctx context.Context, names []string, pred func(*Seen) bool) int {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		n := w.Count(names, pred)
		if n == len(names) {
			return n
		}
		select {
		case <-ctx.Done():
			return n
		case <-w.changed:
		case <-tick.C:
		}
	}
}

// Exists is a predicate for WaitFor: the object was seen.
func Exists(*Seen) bool { return true }

// IsRunning is a predicate for WaitFor: the object was seen running.
func IsRunning(s *Seen) bool { return !s.Running.IsZero() }

// IsFinished is a predicate for WaitFor: the object was seen finished.
func IsFinished(s *Seen) bool { return !s.Finished.IsZero() }
