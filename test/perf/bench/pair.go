package main

import (
	"context"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/trainyard/trainyard/apis/trainer/v1alpha1"
	"github.com/trainyard/trainyard/test/perf/harness"
)

// pairManagedBy hands the pair phase's TrainJobs to another controller, so
// that the manager leaves them alone (MultiKueue's name: the only other value
// the API allows; without a queue, Kueue leaves them alone too).
const pairManagedBy = "kueue.x-k8s.io/multikueue"

// pair is the pair limit: a plain client does what the real path does for each
// job — create the TrainJob (through the same admission webhooks), then its
// JobSet, owned by it (through JobSet's) — with no controller in between. No
// controller that makes the JobSet from the TrainJob can beat it: it is the
// same two creates with zero reaction time.
func (b *bench) pair(ctx context.Context, tmpl *jobsetv1alpha2.JobSet) (*Phase, error) {
	const ns = "bench-pair"
	if err := harness.Namespace(ctx, b.cli, ns); err != nil {
		return nil, err
	}
	jobsets, err := harness.Watch(ctx, b.c.RESTConfig(), harness.JobSets, ns)
	if err != nil {
		return nil, err
	}
	names := harness.Names("pair", b.cfg.n)
	submit := func(ctx context.Context) (map[string]time.Time, time.Duration, error) {
		return harness.BurstFunc(ctx, len(names), b.cfg.load, func(ctx context.Context, i int) (string, error) {
			return names[i], b.createPair(ctx, ns, names[i], tmpl)
		})
	}
	b.ownerRetries.Store(0)
	ph, err := b.measure(ctx, "pair", ns, names, submit, jobsets, jobsets)
	if err != nil {
		return nil, err
	}
	ph.OwnerRetries = int(b.ownerRetries.Load())
	b.cleanup(ctx, "pair", ns)
	return ph, nil
}

// createPair creates one TrainJob and then its JobSet, as the manager renders it.
func (b *bench) createPair(ctx context.Context, ns, name string, tmpl *jobsetv1alpha2.JobSet) error {
	tj := harness.TrainJob(ns, name, int32(b.cfg.nodesPerJob), "")
	tj.Spec.Suspend = &b.cfg.suspend
	tj.Spec.ManagedBy = ptr.To(pairManagedBy)
	if err := harness.CreateRetrying(ctx, b.cli, tj); err != nil {
		return err
	}
	if tj.UID == "" { // created by an earlier attempt whose answer was lost
		if err := b.cli.Get(ctx, client.ObjectKeyFromObject(tj), tj); err != nil {
			return err
		}
	}
	js := tmpl.DeepCopy()
	js.Namespace, js.Name = ns, name
	js.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))}
	if b.cfg.suspend {
		js.Spec.Suspend = ptr.To(true)
	}
	// JobSet's admission webhook looks the owner up in its informer cache,
	// which can lag the TrainJob's create by a moment: retry that denial, as
	// a controller requeues.
	for attempt := 0; ; attempt++ {
		err := harness.CreateRetrying(ctx, b.cli, js)
		if err == nil || attempt >= 100 || !ownerNotSeenYet(err) {
			return err
		}
		b.ownerRetries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ownerNotSeenYet is JobSet's webhook not finding the JobSet's owner.
func ownerNotSeenYet(err error) bool {
	return strings.Contains(err.Error(), "denied the request") && strings.Contains(err.Error(), "not found")
}
