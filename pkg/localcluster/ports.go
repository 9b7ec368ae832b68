package localcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
)

// Ports are the loopback ports a cluster listens on. All are chosen at random
// (freePorts) when the cluster comes up, so that several clusters (a person's
// `make cluster-up` and a test suite's) can run side by side.
type Ports struct {
	EtcdClient     int `json:"etcdClient"`
	EtcdPeer       int `json:"etcdPeer"`
	APIServer      int `json:"apiServer"`
	ControllerMgr  int `json:"controllerManager"`
	Scheduler      int `json:"scheduler"`
	JobSetWebhook  int `json:"jobsetWebhook"`
	JobSetHealth   int `json:"jobsetHealth"`
	KueueWebhook   int `json:"kueueWebhook"`
	KueueHealth    int `json:"kueueHealth"`
	ManagerWebhook int `json:"managerWebhook"`
	ManagerMetrics int `json:"managerMetrics"`
	ManagerHealth  int `json:"managerHealth"`
	ManagerStatus  int `json:"managerStatus"`
	// The manager's /debug/pprof (Options.Profiling); unused without it.
	ManagerPprof int `json:"managerPprof"`
	// Volcano's health endpoints (Options.GangScheduler); unused without it.
	VolcanoSchedulerHealth  int `json:"volcanoSchedulerHealth"`
	VolcanoControllerHealth int `json:"volcanoControllerHealth"`
	// The coscheduling scheduler's secure port and its controller's health probes
	// (Options.GangScheduler).
	CoschedulingScheduler  int `json:"coschedulingScheduler"`
	CoschedulingController int `json:"coschedulingController"`
}

// freePorts fills every field of Ports with a distinct free port. All listeners
// are held open until every port is chosen, so no two fields get the same port.
//
// Ports come from below the kernel's ephemeral range, at random: a port the
// kernel hands out for ":0" is also what it hands out as the source port of
// outgoing connections, and with several clusters starting side by side (go
// test runs packages in parallel) one of their many connections took such a
// port before the component that was to listen on it started. Each port is
// checked on every address (the manager's status server listens on all of
// them). Another program may still take a port between here and the
// component's start; the component then fails loudly.
func freePorts() (Ports, error) {
	var p Ports
	v := reflect.ValueOf(&p).Elem()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	low, high := portRange()
	for i := 0; i < v.NumField(); i++ {
		var l net.Listener
		var err error
		for try := 0; try < 200; try++ {
			if l, err = net.Listen("tcp", fmt.Sprintf(":%d", low+rand.IntN(high-low))); err == nil {
				break
			}
		}
		if err != nil {
			return p, fmt.Errorf("finding a free port in [%d, %d): %w", low, high, err)
		}
		ls = append(ls, l)
		v.Field(i).SetInt(int64(l.Addr().(*net.TCPAddr).Port))
	}
	return p, nil
}

// portRange is where freePorts looks: from 10000 up to the start of the
// kernel's ephemeral range (net.ipv4.ip_local_port_range; 32768 by default).
func portRange() (low, high int) {
	low, high = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > low+1000 {
				high = n
			}
		}
	}
	return low, high
}

func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
