package cluster

import (
	"fmt"
	"net"
	"reflect"
)

// Ports are the loopback ports a cluster listens on. All are chosen at random by
// the kernel when the cluster comes up, so that several clusters (a person's
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
}

// freePorts fills every field of Ports with a distinct free port on 127.0.0.1. All
// listeners are held open until every port is chosen, so no two fields get the same
// port. (Another program may still take a port between here and the component's
// start; that window is short, and the component then fails loudly.)
func freePorts() (Ports, error) {
	var p Ports
	v := reflect.ValueOf(&p).Elem()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for i := 0; i < v.NumField(); i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return p, fmt.Errorf("finding a free loopback port: %w", err)
		}
		ls = append(ls, l)
		v.Field(i).SetInt(int64(l.Addr().(*net.TCPAddr).Port))
	}
	return p, nil
}

func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
