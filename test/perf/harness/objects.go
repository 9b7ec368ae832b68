package harness

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
)

// QueueLabel is Kueue's queue-name label.
const QueueLabel = "kueue.x-k8s.io/queue-name"

// TrainJob is the job every benchmark submits: the torch-distributed runtime
// (runtimes/torch-distributed.yaml) on nodes nodes, with small requests so that
// thousands of pods fit on the kwok nodes.
func TrainJob(namespace, name string, nodes int32, queue string) *trainer.TrainJob {
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	j := &trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: "TrainJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed"},
			Trainer: &trainer.Trainer{
				NumNodes:         &nodes,
				Command:          []string{"torchrun", "train.py"},
				ResourcesPerNode: &corev1.ResourceRequirements{Requests: res, Limits: res},
			},
		},
	}
	if queue != "" {
		j.Labels = map[string]string{QueueLabel: queue}
	}
	return j
}

// Names returns prefix-00000 … for n objects.
func Names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return out
}

// Load is how a burst is offered: by Workers parallel clients, each as fast as
// the API server answers, or, with PerSecond > 0, paced to that many jobs per
// second in all (an open load below saturation, where latency is the system's
// and not the queue's behind the burst).
type Load struct {
	Workers   int
	PerSecond float64
}

// Burst creates objs under load and returns when each create was issued (by
// name) and how long the whole burst took. Transient errors (the API server's
// 429s, timeouts) are retried; others fail the burst.
func Burst(ctx context.Context, c client.Client, objs []client.Object, load Load) (map[string]time.Time, time.Duration, error) {
	return BurstFunc(ctx, len(objs), load, func(ctx context.Context, i int) (string, error) {
		return objs[i].GetName(), CreateRetrying(ctx, c, objs[i])
	})
}

// BurstFunc runs submit for 0..n-1 under load, as Burst does for one create
// each; submit returns the job's name. A job's issue time is when its submit
// began (after its turn under the pace).
func BurstFunc(ctx context.Context, n int, load Load, submit func(ctx context.Context, i int) (string, error)) (map[string]time.Time, time.Duration, error) {
	issued := make(map[string]time.Time, n)
	var pace *rate.Limiter
	if load.PerSecond > 0 {
		pace = rate.NewLimiter(rate.Limit(load.PerSecond), 1)
	}
	var mu sync.Mutex
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < max(load.Workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if pace != nil && pace.Wait(ctx) != nil {
					return
				}
				t := time.Now()
				name, err := submit(ctx, i)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("submitting %s: %w", name, err) })
					return
				}
				mu.Lock()
				issued[name] = t
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return issued, time.Since(start), firstErr
}

// CreateRetrying creates o, retrying what a user's client would.
func CreateRetrying(ctx context.Context, c client.Client, o client.Object) error {
	for attempt := 0; ; attempt++ {
		err := c.Create(ctx, o)
		if err == nil || apierrors.IsAlreadyExists(err) && attempt > 0 {
			return nil
		}
		// Retry what a user's client would: the API server throttling or
		// failing, and no answer at all (connection refused while it restarts).
		var status apierrors.APIStatus
		retriable := !errors.As(err, &status) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) ||
			apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
		if !retriable || attempt >= 120 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Duration(attempt+1)*100*time.Millisecond, time.Second)):
		}
	}
}

// Namespace creates a namespace (it may exist).
func Namespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// Percentiles returns the p-th percentiles (0–100) of ds, nearest rank.
func Percentiles(ds []time.Duration, ps ...float64) []time.Duration {
	out := make([]time.Duration, len(ps))
	if len(ds) == 0 {
		return out
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	for i, p := range ps {
		k := int(p/100*float64(len(s))+0.999999) - 1
		k = max(0, min(k, len(s)-1))
		out[i] = s[k]
	}
	return out
}

// Unstructured converts YAML-ish maps into an object for kinds the scheme does not know.
func Unstructured(apiVersion, kind, namespace, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	for k, v := range fields {
		u.Object[k] = v
	}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}
