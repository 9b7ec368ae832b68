package eventrecorder

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Provider makes event recorders that write through a Sink. It is what
// mgr.GetEventRecorder would be, had controller-runtime a way to choose its
// sink: manager.Options only takes a broadcaster for the deprecated core/v1
// recorder (EventBroadcaster, GetEventRecorderFor), and the events.k8s.io/v1
// one it builds writes to the events.k8s.io/v1 API.
//
// Like controller-runtime's, it starts its broadcaster on the first event, so
// a manager that never runs a controller starts nothing; and it stops it when
// the manager stops (it is a manager.Runnable). Events recorded after that
// are dropped.
type Provider struct {
	sink   events.EventSink
	scheme *runtime.Scheme
	log    logr.Logger

	mu          sync.Mutex
	broadcaster events.EventBroadcaster // nil until the first event
	cancel      context.CancelFunc      // stops the broadcaster's writes
	stopped     bool
}

// NewProvider returns a Provider writing Events through the core/v1 client c;
// scheme names the kinds of the objects events are about, log gets every
// event at V(1), as controller-runtime's recorders log them.
func NewProvider(c typedcorev1.EventsGetter, scheme *runtime.Scheme, log logr.Logger) *Provider {
	return &Provider{sink: &Sink{Client: c}, scheme: scheme, log: log}
}

// ForManager returns a Provider for mgr's controllers, writing with mgr's
// credentials, and adds it to mgr, which stops it. This is where the
// manager's recorders come from: use it, not mgr.GetEventRecorder, whose
// Events lack the core/v1 fields Kubeflow's SDK needs (see the package
// comment).
func ForManager(mgr manager.Manager) (*Provider, error) {
	c, err := typedcorev1.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("core/v1 client for events: %w", err)
	}
	p := NewProvider(c, mgr.GetScheme(), mgr.GetLogger().WithName("events"))
	if err := mgr.Add(p); err != nil {
		return nil, fmt.Errorf("adding the event recorder to the manager: %w", err)
	}
	return p, nil
}

// GetEventRecorder returns a recorder whose Events name controller as their
// reportingController (and reportingInstance controller-<hostname>).
func (p *Provider) GetEventRecorder(controller string) events.EventRecorder {
	return &recorder{p: p, controller: controller}
}

// Start waits for the manager to stop, then stops the broadcaster: queued
// events are handed to the sink, writes still in flight are cancelled.
func (p *Provider) Start(ctx context.Context) error {
	<-ctx.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.broadcaster != nil {
		p.broadcaster.Shutdown()
		p.cancel()
	}
	return nil
}

// NeedLeaderElection puts the Provider with the controllers: the manager
// stops the runnables that need no election before it stops the
// controllers, so stopped with those it would drop the events of the
// controllers' last passes.
func (p *Provider) NeedLeaderElection() bool { return true }

// running returns the broadcaster, started on first use; nil once the
// Provider has stopped.
func (p *Provider) running() events.EventBroadcaster {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	if p.broadcaster == nil {
		ctx, cancel := context.WithCancel(context.Background())
		b := events.NewBroadcaster(p.sink)
		if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
			p.log.Error(err, "Starting to write events")
			b.Shutdown()
			cancel()
			return nil
		}
		if _, err := b.StartLogging(p.log.V(1)); err != nil {
			p.log.Error(err, "Starting to log events")
		}
		p.broadcaster, p.cancel = b, cancel
	}
	return p.broadcaster
}

// recorder is a Provider's events.EventRecorder for one controller; it gets
// its client-go recorder from the broadcaster on its first event.
type recorder struct {
	p          *Provider
	controller string

	once sync.Once
	rec  events.EventRecorder
}

func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b := r.p.running()
	if b == nil {
		return
	}
	r.once.Do(func() { r.rec = b.NewRecorder(r.p.scheme, r.controller) })
	r.rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
