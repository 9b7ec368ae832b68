package processnode

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Provider runs the pods bound to the node as local processes. It is the
// virtual-kubelet PodLifecycleHandler (and PodNotifier) of the agent.
type Provider struct {
	cfg         *Config
	client      kubernetes.Interface
	sources     Sources
	tokens      TokenSource
	net         *network
	hosts       *hostsTable
	allocatable corev1.ResourceList
	gpus        *gpuAllocator
	logf        func(string, ...interface{})
	ctx         context.Context

	mu     sync.Mutex
	pods   map[string]*podRun // namespace/name
	notify func(*corev1.Pod)
	wg     sync.WaitGroup
}

// apiSources reads ConfigMaps and Secrets from the API server.
type apiSources struct{ client kubernetes.Interface }

func (s apiSources) ConfigMap(ns, name string) (*corev1.ConfigMap, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (s apiSources) Secret(ns, name string) (*corev1.Secret, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func newProvider(ctx context.Context, cfg *Config, client kubernetes.Interface, nw *network, allocatable corev1.ResourceList, alloc *gpuAllocator) *Provider {
	p := &Provider{
		cfg: cfg, client: client, net: nw, allocatable: allocatable, gpus: alloc, logf: cfg.Logf, ctx: ctx,
		sources: apiSources{client: client},
		tokens: apiTokens{create: func(ctx context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
		}},
		pods: map[string]*podRun{},
	}
	p.hosts = newHostsTable(cfg.Logf)
	return p
}

func podKey(ns, name string) string { return ns + "/" + name }

// NotifyPods registers the pod controller's status callback.
func (p *Provider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

func (p *Provider) notifyPod(pod *corev1.Pod) {
	p.mu.Lock()
	f := p.notify
	p.mu.Unlock()
	if f != nil {
		f(pod)
	}
}

// CreatePod starts running a pod; the work happens in the background and shows in
// the pod's status.
func (p *Provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := podKey(pod.Namespace, pod.Name)
	if r, ok := p.pods[key]; ok && r.uid == string(pod.UID) {
		return nil
	}
	r := newPodRun(p, pod)
	p.pods[key] = r
	p.logf("pod %s: starting (uid %s)", key, pod.UID)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		r.run(p.ctx)
		p.afterRun(r)
	}()
	return nil
}

// afterRun deletes a pod whose deletion stopped it from the API server (grace
// period 0, once its processes are gone, as the kubelet does), and forgets pods
// that are gone from the API server already.
func (p *Provider) afterRun(r *podRun) {
	r.mu.Lock()
	deleted := r.stopping && r.stopReason == stopDeleted
	remove := r.removeWhenDone
	pod := r.pod
	r.mu.Unlock()
	if deleted {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		uid := pod.UID
		err := p.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: ptrTo(int64(0)), Preconditions: &metav1.Preconditions{UID: &uid}})
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			p.logf("pod %s: deleting from the API server: %v", r.key, err)
		}
	}
	if remove {
		p.forget(r)
	}
}

func (p *Provider) forget(r *podRun) {
	p.mu.Lock()
	if cur, ok := p.pods[r.key]; ok && cur == r {
		delete(p.pods, r.key)
	}
	p.mu.Unlock()
	if p.cfg.KeepRoots {
		kept := filepath.Join(p.cfg.StateDir, keptRootsDir, filepath.Base(r.dir))
		if err := os.MkdirAll(filepath.Dir(kept), 0o755); err == nil {
			if err := os.Rename(filepath.Join(r.dir, rootsDir), kept); err == nil {
				p.logf("pod %s: its containers' root directories are kept in %s", r.key, kept)
			}
		}
	}
	_ = os.RemoveAll(r.dir)
}

// keptRootsDir holds, in the state directory, the containers' root directories
// of pods that are gone, when Config.KeepRoots is set.
const keptRootsDir = "kept-roots"

// UpdatePod takes the new labels, annotations and activeDeadlineSeconds of a
// pod; the annotation naming its GPUs stays (annotateGPUsLocked).
func (p *Provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	r := p.get(pod.Namespace, pod.Name)
	if r == nil || r.uid != string(pod.UID) {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	r.mu.Lock()
	r.pod.Labels, r.pod.Annotations = pod.Labels, pod.Annotations
	r.annotateGPUsLocked()
	r.pod.Spec.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	r.mu.Unlock()
	return nil
}

// DeletePod stops a pod: SIGTERM to its containers, SIGKILL after the deletion's
// grace period. When the pod is gone from the API server, its files go too.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	r := p.get(pod.Namespace, pod.Name)
	if r == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	grace := r.gracePeriod()
	if pod.DeletionGracePeriodSeconds != nil {
		grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	gone := false
	cur, err := p.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	// With a node's credential (checkIdentity), the Node authorizer lets the
	// agent read only the pods bound to its node: one that is gone is
	// Forbidden, not NotFound.
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || err == nil && cur.UID != types.UID(r.uid) {
		gone = true
	}
	r.mu.Lock()
	if gone {
		r.removeWhenDone = true
	}
	r.mu.Unlock()
	select {
	case <-r.done:
		if gone {
			p.forget(r)
		}
		return nil
	default:
	}
	reason := stopDeleted
	if gone {
		grace = 0
	}
	r.stop(reason, grace)
	return nil
}

func (p *Provider) get(ns, name string) *podRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods[podKey(ns, name)]
}

// GetPod returns a pod of this node with its current status.
func (p *Provider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	r := p.get(ns, name)
	if r == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", ns, name)
	}
	return r.snapshot(), nil
}

// GetPodStatus returns the current status of a pod of this node.
func (p *Provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod this node knows, finished ones included.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	pods := make([]*corev1.Pod, 0, len(runs))
	for _, r := range runs {
		pods = append(pods, r.snapshot())
	}
	return pods, nil
}

// ContainerLogs serves the kubelet's containerLogs route: the current run of the
// container, or with Previous the run before it.
func (p *Provider) ContainerLogs(ctx context.Context, ns, name, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	r := p.get(ns, name)
	if r == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", ns, name)
	}
	r.mu.Lock()
	insts := r.logs[container]
	_, known := r.statuses[container]
	r.mu.Unlock()
	if !known {
		return nil, errdefs.NotFoundf("container %s is not in pod %s/%s", container, ns, name)
	}
	idx := len(insts) - 1
	if opts.Previous {
		idx--
	}
	if idx < 0 {
		if opts.Previous {
			return nil, errdefs.InvalidInputf("previous terminated container %q in pod %q not found", container, name)
		}
		return nil, errdefs.InvalidInputf("container %q in pod %q is waiting to start", container, name)
	}
	inst := insts[idx]
	o := LogOptions{Tail: -1, LimitBytes: opts.LimitBytes, Timestamps: opts.Timestamps, Follow: opts.Follow && !opts.Previous}
	if opts.Tail > 0 {
		o.Tail = opts.Tail
	}
	if opts.SinceSeconds > 0 {
		o.SinceTime = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	} else if !opts.SinceTime.IsZero() {
		o.SinceTime = opts.SinceTime
	}
	return ReadLogs(ctx, inst.path, o, inst.finished)
}

// stopAll ends every pod (agent shutdown) within grace and waits for them.
func (p *Provider) stopAll(grace time.Duration) {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	for _, r := range runs {
		g := r.gracePeriod()
		if g > grace {
			g = grace
		}
		r.stop(stopShutdown, g)
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace + 10*time.Second):
		p.logf("pods did not stop in time")
	}
}
