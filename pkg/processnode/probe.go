package processnode

import (
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Readiness: a container with a tcpSocket readinessProbe is ready only once a
// TCP connection to its port succeeds, as with a kubelet; JobSet's dependsOn
// (an MPI launcher waits for its sshd nodes) and Services' endpoints rely on
// it. A container without a readiness probe is ready while it runs. Other
// probe kinds (exec, httpGet, grpc) are not run: such a container is ready
// while it runs.

// kubelet defaults of a probe's timing.
const (
	defaultPeriod           = 10 * time.Second
	defaultTimeout          = time.Second
	defaultFailureThreshold = 3
)

// tcpReadiness returns the TCP readiness probe of c, or nil.
func tcpReadiness(c *corev1.Container) *corev1.Probe {
	if p := c.ReadinessProbe; p != nil && p.TCPSocket != nil {
		return p
	}
	return nil
}

// ProbeAddr is where a tcpSocket probe connects: the probe's host, else the
// pod's IP, and its port, a number or the name of one of the container's ports.
func ProbeAddr(c *corev1.Container, a *corev1.TCPSocketAction, podIP string) (string, error) {
	host := a.Host
	if host == "" {
		host = podIP
	}
	port := 0
	if a.Port.Type == intstr.Int {
		port = int(a.Port.IntVal)
	} else {
		for _, p := range c.Ports {
			if p.Name == a.Port.StrVal {
				port = int(p.ContainerPort)
			}
		}
	}
	if port <= 0 || port > 65535 {
		return "", fmt.Errorf("container %s: readiness probe port %s is not a port of the container", c.Name, a.Port.String())
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

func seconds(v int32, def time.Duration) time.Duration {
	if v > 0 {
		return time.Duration(v) * time.Second
	}
	return def
}

// probeReadiness runs c's TCP readiness probe from the pod's network namespace
// until done closes, setting the container's Ready: true after successThreshold
// successes in a row, false after failureThreshold failures in a row.
func (r *podRun) probeReadiness(c corev1.Container, id string, done <-chan struct{}) {
	p := tcpReadiness(&c)
	r.mu.Lock()
	ip, sb := r.ip, r.sb
	r.mu.Unlock()
	addr, err := ProbeAddr(&c, p.TCPSocket, ip)
	if err != nil {
		r.logf("%v", err)
		return
	}
	period, timeout := seconds(p.PeriodSeconds, defaultPeriod), seconds(p.TimeoutSeconds, defaultTimeout)
	successThreshold, failureThreshold := max(p.SuccessThreshold, 1), p.FailureThreshold
	if failureThreshold <= 0 {
		failureThreshold = defaultFailureThreshold
	}
	successes, failures := int32(0), int32(0)
	wait := time.Duration(p.InitialDelaySeconds) * time.Second
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		case <-time.After(wait):
		}
		wait = period
		ok := r.dial(sb, fmt.Sprintf("%s/probe/%d", id, n), addr, timeout, done)
		if ok {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
		}
		switch {
		case ok && successes >= successThreshold:
			r.setReady(c.Name, true, done)
		case !ok && failures >= failureThreshold:
			r.setReady(c.Name, false, done)
		}
	}
}

// dial asks the sandbox to connect to addr and reports whether it could.
func (r *podRun) dial(sb *sandbox, id, addr string, timeout time.Duration, done <-chan struct{}) bool {
	events, err := sb.run(sbCommand{Op: "dial", ID: id, Addr: addr, TimeoutMS: int(timeout / time.Millisecond)})
	if err != nil {
		return false
	}
	defer sb.forget(id)
	select {
	case ev := <-events:
		return ev.Op == "dialed" && ev.Code == 0
	case <-sb.done:
	case <-done:
	}
	return false
}

// setReady sets a running container's Ready, unless it has ended meanwhile.
func (r *podRun) setReady(name string, ready bool, done <-chan struct{}) {
	select {
	case <-done:
		return
	default:
	}
	r.update(func() {
		if s := r.statuses[name]; s.State.Running != nil {
			s.Ready = ready
		}
	})
}
