package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/trainyard/trainyard/pkg/localcluster"
)

// printTools prints runTools, one per line.
func printTools(f runFlags) int {
	wd, _ := os.Getwd()
	repo, err := localcluster.FindRepoDir(wd)
	if err != nil {
		return fail(err)
	}
	tools, err := runTools(repo, f)
	if err != nil {
		return fail(err)
	}
	for _, t := range tools {
		fmt.Println(t)
	}
	return 0
}

// runTools are the build.sh targets of what run starts: the binaries under
// bin/k8s of its cluster (the manager and the node agent are make build's),
// and kubectl with -keep, whose commands it suggests.
func runTools(repo string, f runFlags) ([]string, error) {
	bins, err := localcluster.Binaries(runOptions(repo, filepath.Join(repo, "bin", "cluster"), f))
	if err != nil {
		return nil, err
	}
	var tools []string
	binDir := filepath.Join(repo, "bin", "k8s")
	for _, b := range bins {
		if filepath.Dir(b) == binDir {
			tools = append(tools, filepath.Base(b))
		}
	}
	if f.keep {
		tools = append(tools, "kubectl")
	}
	return tools, nil
}
