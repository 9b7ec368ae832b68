// Command trainyard is the command line of Trainyard: the Kubeflow SDK's
// TrainerClient flow from a shell. `trainyard runtimes` lists the runtimes,
// `trainyard train` creates a TrainJob from a script or a command, `trainyard get`,
// `logs`, `wait` and `delete` follow it. It talks to the cluster of the current
// kubeconfig context with kubectl's connection flags (--kubeconfig, --context, -n,
// --as, --token, ...; `trainyard options`), completes command lines
// (`trainyard completion bash`), and installed as kubectl-trainyard it is the
// kubectl plugin `kubectl trainyard`. See docs/cli.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/trainyard/trainyard/pkg/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
