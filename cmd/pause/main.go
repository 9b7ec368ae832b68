// Command pause is the pod sandbox ("infra") process of the local cluster's
// container nodes: containerd runs it first in every pod, to hold the pod's
// namespaces, as registry.k8s.io/pause does on a real node (the machines the
// local cluster runs on cannot pull that image). It waits for SIGINT or
// SIGTERM and exits 0; as PID 1 of a pod with a shared process namespace it
// also reaps orphaned children.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
