package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/trainyard/trainyard/pkg/processnode"
)

// gpuCheck is `trainyard-node gpu-check`: the process node's GPU path on this
// machine with no API server (processnode.GPUCheck; test/gpucheck runs it on a
// machine with GPUs).
//
//	trainyard-node gpu-check [--nvidia-smi PATH] [--state-dir DIR] [--gpus N]
//	    [--workdir DIR] [--env NAME=VALUE]... [--cpu-command 'sh -c ...'] -- COMMAND...
func gpuCheck(args []string) int {
	fs := flag.NewFlagSet("gpu-check", flag.ExitOnError)
	var c processnode.GPUCheck
	fs.StringVar(&c.NvidiaSMI, "nvidia-smi", "", "nvidia-smi (default: as the agent finds it)")
	fs.StringVar(&c.StateDir, "state-dir", "/tmp/trainyard-gpu-check", "directory of the allocator's state file and the pods' directories")
	fs.IntVar(&c.GPUs, "gpus", 1, "GPUs the GPU pod asks for")
	fs.StringVar(&c.WorkingDir, "workdir", "", "working directory of the pods' containers (default: a root of their own)")
	cpu := fs.String("cpu-command", "", "shell command of a pod that asks for no GPU (sh -c); empty: no such pod")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	var env multiFlag
	fs.Var(&env, "env", "NAME=VALUE in both pods' containers; repeatable")
	_ = fs.Parse(args)
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "trainyard-node gpu-check: the GPU pod's command goes after --")
		return 2
	}
	c.GPUCommand = fs.Args()
	if *cpu != "" {
		c.CPUCommand = []string{"sh", "-c", *cpu}
	}
	var err error
	if c.Env, err = processnode.ParseEnvDefaults(env); err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-node gpu-check: --env:", err)
		return 2
	}
	for _, q := range processnode.DetectHostQuirks(processnode.DefaultHostPaths) {
		fmt.Printf("host quirk: %s\n", q.Why)
		c.DefaultEnv = append(c.DefaultEnv, q.Env...)
	}
	c.Out = os.Stdout
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	if err := c.Run(ctx); err != nil {
		fmt.Printf("GPU CHECK FAILED after %.1fs: %s\n", time.Since(start).Seconds(), strings.ReplaceAll(err.Error(), "\n", "; "))
		return 1
	}
	fmt.Printf("GPU CHECK PASSED in %.1fs\n", time.Since(start).Seconds())
	return 0
}
