// Command netprobe is the image of TestContainerNode's network checks.
// "netprobe serve PORT" answers every HTTP request with its host name (the
// pod's). Otherwise each argument is one check, run in order, each retried
// for up to a minute (kube-proxy and CoreDNS learn of new Services and pods
// within seconds); it prints one line per check and exits 1 on the first
// that fails:
//
//	kube            list the Services of the pod's namespace by in-cluster config
//	get=URL@WANT    an HTTP GET whose body contains WANT
//	resolve=NAME@IP NAME resolves (resolv.conf's search path) to IP
//	write=PATH      write PATH and read it back
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "serve" {
		host, _ := os.Hostname()
		err := http.ListenAndServe(":"+os.Args[2], http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = fmt.Fprintf(w, "served by %s\n", host)
		}))
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, arg := range os.Args[1:] {
		var last error
		deadline := time.Now().Add(time.Minute)
		for {
			out, err := check(arg)
			if err == nil {
				fmt.Printf("ok %s: %s\n", arg, out)
				break
			}
			last = err
			if time.Now().After(deadline) {
				fmt.Printf("FAILED %s: %v\n", arg, last)
				os.Exit(1)
			}
			time.Sleep(time.Second)
		}
	}
}

func check(arg string) (string, error) {
	kind, val, _ := strings.Cut(arg, "=")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	switch kind {
	case "kube":
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return "", err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return "", err
		}
		ns, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
		if err != nil {
			return "", err
		}
		list, err := cs.CoreV1().Services(string(ns)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		return fmt.Sprintf("%s via %s: services %v", ns, cfg.Host, names), nil
	case "get":
		url, want, _ := strings.Cut(val, "@")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if !strings.Contains(string(body), want) {
			return "", fmt.Errorf("body %q lacks %q", body, want)
		}
		return strings.TrimSpace(string(body)), nil
	case "resolve":
		name, want, _ := strings.Cut(val, "@")
		addrs, err := net.DefaultResolver.LookupHost(ctx, name)
		if err != nil {
			return "", err
		}
		if !slices.Contains(addrs, want) {
			return "", fmt.Errorf("%s is %v, not %s", name, addrs, want)
		}
		return fmt.Sprint(addrs), nil
	case "write":
		data := []byte("written by " + os.Getenv("HOSTNAME") + "\n")
		if err := os.MkdirAll(filepath.Dir(val), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(val, data, 0o644); err != nil {
			return "", err
		}
		got, err := os.ReadFile(val)
		if err != nil || string(got) != string(data) {
			return "", fmt.Errorf("read back %q: %v", got, err)
		}
		return strings.TrimSpace(string(got)), nil
	}
	return "", fmt.Errorf("unknown check %q", kind)
}
