package processnode

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/trainyard/trainyard/pkg/processnode/gpus"
)

// DefaultNvidiaSMI is where NVIDIA's container toolkit and GPU images put
// nvidia-smi when it is not on PATH.
const DefaultNvidiaSMI = "/usr/local/nvidia/bin/nvidia-smi"

// NoNvidiaSMI as Config.NvidiaSMI turns GPU discovery off: the node has no GPUs.
const NoNvidiaSMI = "none"

// nvidiaSMITimeout bounds nvidia-smi, which hangs when the driver does.
const nvidiaSMITimeout = 30 * time.Second

// discoverGPUs lists the host's GPUs with nvidia-smi (Config.NvidiaSMI). A
// path the configuration names must work: a node that was told where its
// GPUs are and cannot list them is misconfigured, and the agent does not
// start. Without one, nvidia-smi is looked for on PATH, then at
// DefaultNvidiaSMI; none found, or one that fails (no driver loaded), means
// no GPUs, said once in the log.
func discoverGPUs(ctx context.Context, path string, logf func(string, ...interface{})) ([]gpus.GPU, error) {
	if path == NoNvidiaSMI {
		logf("GPUs: discovery off (--nvidia-smi=%s); the node has none", NoNvidiaSMI)
		return nil, nil
	}
	explicit := path != ""
	if !explicit {
		if p, err := exec.LookPath("nvidia-smi"); err == nil {
			path = p
		} else if executable(DefaultNvidiaSMI) == nil {
			path = DefaultNvidiaSMI
		} else {
			logf("GPUs: no nvidia-smi on PATH nor at %s; the node has none", DefaultNvidiaSMI)
			return nil, nil
		}
	}
	list, err := runNvidiaSMI(ctx, path)
	switch {
	case err != nil && explicit:
		return nil, fmt.Errorf("listing GPUs: %w", err)
	case err != nil:
		logf("GPUs: %v; the node has none", err)
		return nil, nil
	}
	var names []string
	for _, g := range list {
		names = append(names, fmt.Sprintf("%d %s %s %d MiB", g.Index, g.UUID, g.Name, g.MemoryMiB))
	}
	logf("GPUs (%s): %d found%s", path, len(list), prefixed(": ", strings.Join(names, "; ")))
	return list, nil
}

func runNvidiaSMI(ctx context.Context, path string) ([]gpus.GPU, error) {
	ctx, cancel := context.WithTimeout(ctx, nvidiaSMITimeout)
	defer cancel()
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, path, gpus.QueryArgs...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			// nvidia-smi explains itself on stdout ("No devices were found",
			// "NVIDIA-SMI has failed because it couldn't communicate with the
			// NVIDIA driver").
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)+" "+stderr.String()))
		}
		return nil, fmt.Errorf("%s %s: %w", path, strings.Join(gpus.QueryArgs, " "), err)
	}
	list, err := gpus.Parse(string(out))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return list, nil
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
