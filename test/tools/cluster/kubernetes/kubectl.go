//go:build with_kubectl

package main

import (
	"os"

	_ "k8s.io/client-go/plugin/pkg/client/auth" // the client auth plugins
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func init() {
	components["kubectl"] = func() int {
		// As cmd/kubectl: the verbosity is set before the command is built,
		// which already logs (plugins, .kuberc).
		_, _ = logs.GlogSetter(cmd.GetLogVerbosity(os.Args))
		if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
			util.CheckErr(err) // prints the error and exits non-zero
		}
		return 0
	}
}
