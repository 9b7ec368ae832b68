package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// profiler takes CPU profiles of the API server and the manager during a
// phase's burst (-profile): what limits a figure is read from where those two
// spend their cores, not guessed from throughput.
type profiler struct {
	d          time.Duration
	dir        string
	apiserver  *http.Client
	apiURL     string
	managerURL string // cluster.ManagerPprofURL
}

func newProfiler(d time.Duration, dir string, rc *rest.Config, managerURL string) (*profiler, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("an HTTP client for the API server's pprof: %w", err)
	}
	return &profiler{d: d, dir: dir, apiserver: hc, apiURL: rc.Host, managerURL: managerURL}, nil
}

// start begins both profiles; the returned function waits for them and
// returns the files written (a profile that failed is logged and skipped:
// the phase's figures do not depend on it).
func (p *profiler) start(ctx context.Context, phase string) func() []string {
	if p == nil {
		return func() []string { return nil }
	}
	targets := []struct {
		name string
		cli  *http.Client
		url  string
	}{
		{"apiserver", p.apiserver, p.apiURL},
		{"manager", http.DefaultClient, p.managerURL},
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		files []string
	)
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			file := filepath.Join(p.dir, fmt.Sprintf("profile-%s-%s.pprof", phase, t.name))
			if err := p.fetch(ctx, t.cli, t.url, file); err != nil {
				logf("phase %s: CPU profile of the %s: %v", phase, t.name, err)
				return
			}
			mu.Lock()
			files = append(files, file)
			mu.Unlock()
		}()
	}
	return func() []string {
		wg.Wait()
		sort.Strings(files)
		for _, f := range files {
			summarize(f)
		}
		return files
	}
}

func (p *profiler) fetch(ctx context.Context, cli *http.Client, base, file string) error {
	secs := strconv.Itoa(max(1, int(p.d.Seconds())))
	ctx, cancel := context.WithTimeout(ctx, p.d+time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/debug/pprof/profile?seconds="+secs, nil)
	if err != nil {
		return err
	}
	resp, err := cli.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", req.URL.Path, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close() // the copy's error is the one to report
		return err
	}
	return f.Close()
}

// summarize writes the profile's top functions, by time including callees,
// next to it (FILE.txt), with the Go toolchain's pprof when it is on PATH.
func summarize(file string) {
	out, err := exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=40", file).Output()
	if err != nil {
		logf("summarizing %s: %v", file, err)
		return
	}
	if err := os.WriteFile(file+".txt", out, 0o644); err != nil {
		logf("summarizing %s: %v", file, err)
	}
}
