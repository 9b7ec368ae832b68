// Command kubernetes serves the Kubernetes components built into it, and etcd,
// each by its own name, as single-binary distributions of Kubernetes do: one
// binary, linked once, whose packages (client-go, apimachinery, apiserver, gRPC,
// ...) compile once for all of them (test/tools/README.md, "One binary for the
// Kubernetes components").
//
// Each component is the real upstream command at the version of the module's
// go.mod (k8s.io/kubernetes v1.37.2, etcd v3.7.0): the cobra command its own
// main package builds (app.NewAPIServerCommand, ...) or etcd's etcdmain.Main, run
// as that main runs it. Which components a build holds is chosen with build
// tags, one per component (with_etcd, with_kube_apiserver,
// with_kube_controller_manager, with_kube_scheduler, with_kubectl, with_kubelet,
// with_kube_proxy), so a binary links only what is asked of it;
// test/tools/build.sh picks them and links the components' names to the binary.
//
// The component is the name the binary runs under (a link named
// kube-apiserver), or its first argument:
//
//	kube-apiserver --etcd-servers=...        (bin/k8s/kube-apiserver -> kubernetes)
//	kubernetes kube-apiserver --etcd-servers=...
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// components are the commands built in, by name; each file's init adds its own.
var components = map[string]func() int{}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := components[name]; !ok && len(os.Args) > 1 {
		if _, ok := components[os.Args[1]]; ok {
			// The component sees what its own binary would: its name first.
			os.Args = os.Args[1:]
			name = os.Args[0]
		}
	}
	run, ok := components[name]
	if !ok {
		var names []string
		for n := range components {
			names = append(names, n)
		}
		slices.Sort(names)
		fmt.Fprintf(os.Stderr, "usage: %s COMPONENT [FLAGS] (or run it as a link named COMPONENT)\ncomponents built in: %s\n",
			filepath.Base(os.Args[0]), strings.Join(names, " "))
		os.Exit(2)
	}
	os.Exit(run())
}
