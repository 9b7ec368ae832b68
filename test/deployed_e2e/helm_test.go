package deployed_e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func helmBin() string    { return filepath.Join(repo, "bin", "helm") }
func kubectlBin() string { return filepath.Join(repo, "bin", "k8s", "kubectl") }
func chartDir() string   { return filepath.Join(repo, "manifests", "charts", "trainyard") }

// imageValues point the chart at the manager image in the nodes, which are
// never asked to pull it.
func imageValues() []string {
	i := strings.LastIndex(managerImage, ":")
	return []string{
		"--set", "image.repository=" + managerImage[:i],
		"--set", "image.tag=" + managerImage[i+1:],
		"--set", "image.pullPolicy=Never",
	}
}

// The ServiceAccount that the chart binds to trainyard-metrics-reader
// (metrics.readerServiceAccounts), as for a Prometheus.
const scraperNS, scraperSA = "default", "metrics-scraper"

// installArgs is the install, as docs/install.md gives it, with the local
// image and a metrics reader; --wait returns once the Deployment is available.
func installArgs() []string {
	return append([]string{"install", release, chartDir(), "--namespace", managerNS, "--create-namespace",
		"--wait", "--timeout", "4m",
		"--set", "metrics.readerServiceAccounts[0].name=" + scraperSA,
		"--set", "metrics.readerServiceAccounts[0].namespace=" + scraperNS,
	}, imageValues()...)
}

// helm runs bin/helm against the cluster; with its output on failure.
func helm(ctx context.Context, args ...string) (string, error) {
	return runTool(ctx, helmBin(), append(args, "--kubeconfig", c.Kubeconfig())...)
}

// kubectl runs bin/k8s/kubectl against the cluster.
func kubectl(ctx context.Context, args ...string) (string, error) {
	return runTool(ctx, kubectlBin(), append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
}

// runTool runs bin from the repository (example paths work as in the docs)
// and returns its standard output; the error has its standard error.
func runTool(ctx context.Context, bin string, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Dir = repo
	// Helm keeps its cache and configuration under HOME: the cluster's.
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(c.StateDir(), "home"))
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s (after %s): %w: %s", filepath.Base(bin), strings.Join(args, " "),
			time.Since(start).Round(time.Second), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// describeManager says what the manager's pods are doing, for a failure.
func describeManager(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "pods", "-n", managerNS, "-o", "wide"},
		{"describe", "pods", "-n", managerNS, "-l", "app.kubernetes.io/name=trainyard"},
		{"logs", "-n", managerNS, "-l", "app.kubernetes.io/name=trainyard", "--tail=40", "--all-containers", "--prefix"},
	} {
		out, err := kubectl(ctx, args...)
		fmt.Fprintf(&b, "$ kubectl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}
