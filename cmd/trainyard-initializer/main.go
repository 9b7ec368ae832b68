// Command trainyard-initializer is the dataset and model initializer of
// Trainyard's runtimes (see pkg/initializer): it fetches STORAGE_URI (hf://,
// s3:// or file://) into /workspace/dataset or /workspace/model and exits 0,
// or prints why it could not and exits 1, which fails the initializer Job and,
// through the JobSet, the TrainJob.
//
// Usage: trainyard-initializer [-dest DIR] dataset|model
//
//	trainyard-initializer --version
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/trainyard/trainyard/pkg/initializer"
	"github.com/trainyard/trainyard/pkg/version"
)

// terminationLog is where the kubelet reads a container's termination message
// from (terminationMessagePath's default), shown in the pod's status.
const terminationLog = "/dev/termination-log"

func main() {
	dest := flag.String("dest", "", "destination directory (default: $DESTINATION, else /workspace/dataset or /workspace/model)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), `Usage: %s [-dest DIR] dataset|model
       %[1]s --version

Fetches STORAGE_URI into the destination. Environment (Kubeflow Trainer's
initializer contract, plus Trainyard's additions):
  STORAGE_URI        hf://org/name, s3://bucket/prefix or file:///path
  IGNORE_PATTERNS    comma-separated fnmatch patterns of files to skip
  ACCESS_TOKEN       hf:// token;  HF_ENDPOINT  hub URL (default %s)
  ENDPOINT, ACCESS_KEY_ID, SECRET_ACCESS_KEY, REGION   s3://
  AWS_SESSION_TOKEN  s3:// session token of a temporary ACCESS_KEY_ID
  AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME, AWS_STS_ENDPOINT
                     s3:// without a key: temporary credentials from STS
                     AssumeRoleWithWebIdentity, renewed before they expire
  DESTINATION        destination directory (Trainyard)
  UNGZIP=true        decompress fetched *.gz files (Trainyard)
`, os.Args[0], initializer.DefaultHFEndpoint)
		flag.PrintDefaults()
	}
	showVersion := version.RegisterFlag(flag.CommandLine)
	flag.Parse()
	if showVersion.Handled(os.Stdout) {
		return
	}
	if flag.NArg() != 1 || (flag.Arg(0) != string(initializer.Dataset) && flag.Arg(0) != string(initializer.Model)) {
		flag.Usage()
		os.Exit(2)
	}
	cfg := initializer.FromEnv(initializer.Kind(flag.Arg(0)), os.Getenv)
	if *dest != "" {
		cfg.Dest = *dest
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := initializer.Run(ctx, cfg); err != nil {
		msg := fmt.Sprintf("%s initializer failed: %v", flag.Arg(0), err)
		fmt.Fprintln(os.Stderr, msg)
		if f, err := os.OpenFile(terminationLog, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			_, _ = f.WriteString(msg)
			_ = f.Close()
		}
		os.Exit(1)
	}
}
