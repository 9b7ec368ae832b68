package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/pkg/localcluster"
	"github.com/trainyard/trainyard/test/perf/harness"
)

// managerAgent is the manager's user agent (client-go's default: the binary name).
const managerAgent = "trainyard-manager"

type bench struct {
	c          *localcluster.Cluster
	cfg        config
	cli        client.Client // unthrottled, user agent trainyard-bench
	managerPID int
	metricsURL string
	audit      *harness.AuditLog
	markers    int
	// ownerRetries counts the pair phase's JobSet creates that JobSet's
	// webhook refused because its cache had not seen the TrainJob yet.
	ownerRetries atomic.Int64
	prof         *profiler // nil without -profile
}

func newBench(_ context.Context, c *localcluster.Cluster, cfg config) (*bench, error) {
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = -1, 0 // no client-side rate limit: the limit is the API server's
	rc.UserAgent = "trainyard-bench/v0"
	cli, err := client.New(rc, client.Options{Scheme: localcluster.Scheme()})
	if err != nil {
		return nil, err
	}
	b := &bench{c: c, cfg: cfg, cli: cli, metricsURL: c.ManagerMetricsURL(0)}
	for _, p := range c.Processes() {
		if p.Name == localcluster.Manager {
			b.managerPID = p.PID
		}
	}
	if b.managerPID == 0 {
		return nil, fmt.Errorf("the manager is not running")
	}
	if b.audit, err = harness.OpenAuditLog(c.AuditLogFile()); err != nil {
		return nil, err
	}
	return b, nil
}

// warmUp runs one TrainJob through every component and returns the JobSet the
// manager rendered for it, as the template of the raw phase.
func (b *bench) warmUp(ctx context.Context) (*jobsetv1alpha2.JobSet, error) {
	const ns = "bench-warmup"
	if err := harness.Namespace(ctx, b.cli, ns); err != nil {
		return nil, err
	}
	job := harness.TrainJob(ns, "warm-up", int32(b.cfg.nodesPerJob), "")
	if err := b.cli.Create(ctx, job); err != nil {
		return nil, err
	}
	var js jobsetv1alpha2.JobSet
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := b.cli.Get(ctx, types.NamespacedName{Namespace: ns, Name: job.Name}, &js)
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			return nil, fmt.Errorf("waiting for the warm-up JobSet: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	tmpl := &jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: jobsetv1alpha2.GroupVersion.String(), Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{Labels: js.Labels, Annotations: js.Annotations},
		Spec:       js.Spec,
	}
	return tmpl, nil
}

// raw creates the JobSets directly: the limit Trainyard is measured against.
func (b *bench) raw(ctx context.Context, tmpl *jobsetv1alpha2.JobSet) (*Phase, error) {
	const ns = "bench-raw"
	if err := harness.Namespace(ctx, b.cli, ns); err != nil {
		return nil, err
	}
	jobsets, err := harness.Watch(ctx, b.c.RESTConfig(), harness.JobSets, ns)
	if err != nil {
		return nil, err
	}
	names := harness.Names("raw", b.cfg.n)
	objs := make([]client.Object, len(names))
	for i, name := range names {
		js := tmpl.DeepCopy()
		js.Namespace, js.Name = ns, name
		if b.cfg.suspend {
			js.Spec.Suspend = &b.cfg.suspend
		}
		objs[i] = js
	}
	ph, err := b.measure(ctx, "raw", ns, names, b.burst(objs, b.cfg.load), jobsets, jobsets)
	if err != nil {
		return nil, err
	}
	b.cleanup(ctx, "raw", ns)
	return ph, nil
}

// trainJobs submits TrainJobs under load (to queue when set).
func (b *bench) trainJobs(ctx context.Context, phase, queue string, load harness.Load) (*Phase, error) {
	ns := "bench-" + phase
	if err := harness.Namespace(ctx, b.cli, ns); err != nil {
		return nil, err
	}
	if queue != "" {
		if err := b.localQueue(ctx, ns, queue); err != nil {
			return nil, err
		}
	}
	jobsets, err := harness.Watch(ctx, b.c.RESTConfig(), harness.JobSets, ns)
	if err != nil {
		return nil, err
	}
	trainjobs, err := harness.Watch(ctx, b.c.RESTConfig(), harness.TrainJobs, ns)
	if err != nil {
		return nil, err
	}
	names := harness.Names("tj", b.cfg.n)
	objs := make([]client.Object, len(names))
	for i, name := range names {
		tj := harness.TrainJob(ns, name, int32(b.cfg.nodesPerJob), queue)
		tj.Spec.Suspend = &b.cfg.suspend
		objs[i] = tj
	}
	ph, err := b.measure(ctx, phase, ns, names, b.burst(objs, load), jobsets, trainjobs)
	if err != nil {
		return nil, err
	}
	b.cleanup(ctx, phase, ns)
	return ph, nil
}

// kueue runs the trainyard phase through a ClusterQueue with room for every job.
func (b *bench) kueue(ctx context.Context) (*Phase, error) {
	if err := b.clusterQueue(ctx); err != nil {
		return nil, err
	}
	return b.trainJobs(ctx, "kueue", "bench", b.cfg.load)
}

// kueueJobSets is the Kueue path's anchor: a plain client creates the JobSets
// the trainyard phase would, labelled for the same LocalQueue and quota, and
// Kueue's own JobSet integration admits them (no Trainyard in the path).
func (b *bench) kueueJobSets(ctx context.Context, tmpl *jobsetv1alpha2.JobSet) (*Phase, error) {
	const ns = "bench-kueue-jobset"
	if err := b.clusterQueue(ctx); err != nil {
		return nil, err
	}
	if err := b.localQueue(ctx, ns, "bench"); err != nil {
		return nil, err
	}
	jobsets, err := harness.Watch(ctx, b.c.RESTConfig(), harness.JobSets, ns)
	if err != nil {
		return nil, err
	}
	names := harness.Names("kjs", b.cfg.n)
	objs := make([]client.Object, len(names))
	for i, name := range names {
		js := tmpl.DeepCopy()
		js.Namespace, js.Name = ns, name
		js.Labels = map[string]string{harness.QueueLabel: "bench"}
		objs[i] = js
	}
	ph, err := b.measure(ctx, "kueue-jobset", ns, names, b.burst(objs, b.cfg.load), jobsets, jobsets)
	if err != nil {
		return nil, err
	}
	b.cleanup(ctx, "kueue-jobset", ns)
	return ph, nil
}

// clusterQueue makes the ClusterQueue "bench", with room for every job of a
// phase at once, and its ResourceFlavor.
func (b *bench) clusterQueue(ctx context.Context) error {
	milliCPU := b.cfg.n * b.cfg.nodesPerJob * 50 * 2
	memMi := b.cfg.n * b.cfg.nodesPerJob * 64 * 2
	objs := []client.Object{
		harness.Unstructured("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "", "bench", map[string]any{"spec": map[string]any{}}),
		harness.Unstructured("kueue.x-k8s.io/v1beta2", "ClusterQueue", "", "bench", map[string]any{"spec": map[string]any{
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu", "memory"},
				"flavors": []any{map[string]any{"name": "bench", "resources": []any{
					map[string]any{"name": "cpu", "nominalQuota": fmt.Sprintf("%dm", milliCPU)},
					map[string]any{"name": "memory", "nominalQuota": fmt.Sprintf("%dMi", memMi)},
				}}},
			}},
		}}),
	}
	for _, o := range objs {
		if err := b.cli.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// localQueue makes the LocalQueue name in ns (made here too) for the
// ClusterQueue "bench".
func (b *bench) localQueue(ctx context.Context, ns, name string) error {
	if err := harness.Namespace(ctx, b.cli, ns); err != nil {
		return err
	}
	lq := harness.Unstructured("kueue.x-k8s.io/v1beta2", "LocalQueue", ns, name, map[string]any{
		"spec": map[string]any{"clusterQueue": "bench"}})
	if err := b.cli.Create(ctx, lq); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating LocalQueue: %w", err)
	}
	return nil
}

// cleanup deletes a phase's namespace, so that the next phase does not share
// the cluster with its objects being deleted. After the last phase it does
// not: the cluster is stopped next, and its state is removed when one starts
// again (deleting 10 000 suspended TrainJobs' namespace takes ≈ 4 minutes).
func (b *bench) cleanup(ctx context.Context, phase, ns string) {
	if phase == b.cfg.phases[len(b.cfg.phases)-1] {
		logf("phase %s is the last: its namespace %s goes with the cluster", phase, ns)
		return
	}
	if b.cfg.bare {
		// No namespace controller: delete the phase's objects themselves, so
		// that the next phase starts with an empty cache.
		for _, l := range []client.Object{&trainer.TrainJob{}, &jobsetv1alpha2.JobSet{}} {
			if err := b.cli.DeleteAllOf(ctx, l, client.InNamespace(ns)); err != nil {
				logf("%s phase cleanup: %v", phase, err)
			}
		}
		return
	}
	if err := b.deleteNamespace(ctx, ns); err != nil {
		logf("%s phase cleanup: %v", phase, err)
	}
}

// deleteNamespace deletes ns and waits (up to 10 minutes) until it is gone.
func (b *bench) deleteNamespace(ctx context.Context, ns string) error {
	start := time.Now()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := b.cli.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for time.Since(start) < 10*time.Minute {
		err := b.cli.Get(ctx, types.NamespacedName{Name: ns}, obj)
		if apierrors.IsNotFound(err) {
			logf("namespace %s deleted in %.0fs", ns, time.Since(start).Seconds())
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return fmt.Errorf("namespace %s still there after 10 minutes", ns)
}

// flushAudit returns the audit events since the last call: it reads until a
// marker request made now shows up, so nothing still buffered is missed.
func (b *bench) flushAudit(ctx context.Context) ([]harness.AuditEvent, error) {
	b.markers++
	marker := fmt.Sprintf("bench-marker-%d", b.markers)
	_ = b.cli.Get(ctx, types.NamespacedName{Namespace: "default", Name: marker}, &corev1.ConfigMap{})
	var all []harness.AuditEvent
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		evs, err := b.audit.Read()
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
		for i := range evs {
			if evs[i].Name() == marker {
				return all, nil
			}
		}
	}
	return all, fmt.Errorf("the audit log did not show marker %s within 30s", marker)
}

// jobOf maps a manager request to the job it was about: the TrainJob/JobSet
// name, or the object an Event is about (event names are "<object>.<suffix>").
func jobOf(e *harness.AuditEvent) string {
	name := e.Name()
	if strings.HasPrefix(e.Resource(), "events") {
		name, _, _ = strings.Cut(name, ".")
	}
	return name
}
