// Command hello is the image of TestContainerNode: it prints where it runs
// (its host name, which a pod's container gets from the pod, its PID, 1 in a
// container's own PID namespace, and its root directory) and exits 0.
package main

import (
	"fmt"
	"os"
)

func main() {
	host, _ := os.Hostname()
	entries, _ := os.ReadDir("/")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	fmt.Printf("hello from a container: hostname=%s pid=%d root=%v\n", host, os.Getpid(), names)
}
