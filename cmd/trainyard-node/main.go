// Command trainyard-node is the agent of a Trainyard process node: it registers a
// Node with the API server and runs the pods bound to it as processes on this
// machine, each in its own network, mount, PID, UTS and IPC namespaces (see package
// pkg/processnode). The image of a container is not pulled: its command and args
// run on the host, with the host's programs and files.
//
//	trainyard-node --kubeconfig FILE --node-name NAME --state-dir DIR \
//	    --tls-cert-file F --tls-private-key-file F --client-ca-file F \
//	    [--port 0] [--pod-cidr 10.254.0.0/24] [--cluster-pod-cidr 10.254.0.0/16] [--bridge NAME]
//	    [--default-env NAME=VALUE]... [--host-quirks=true] [--keep-roots] [--nvidia-smi PATH]
//	    [--register-taint=true] [--allowed-host-paths DIR,DIR] [--accept-wildcard-tolerations]
//	    [--allow-privileged-credentials]
//	trainyard-node --version
//
// It is a development node: every pod runs as root on this machine, with the
// host's programs, files and capabilities. So that it can join a cluster that
// others use, the Node is registered with the taint
// trainyard.io/process-node=true:NoSchedule and a pod bound to it that does not
// tolerate it fails (reason ProcessNodeTaintNotTolerated), DaemonSet pods
// included; --register-taint=false drops both, for a cluster of one user (the
// local cluster of make run does). hostPath volumes are honoured only under
// --allowed-host-paths (default: none); a pod with another fails
// (HostPathNotAllowed).
//
// Every container's environment starts with what the host's software needs
// (--host-quirks, detected from files: PET_REDIRECTS=1 PET_TEE=1 for Debian's
// torch 1.13 on Python 3.11) and then --default-env; a container's own value wins.
//
// The host's NVIDIA GPUs, as nvidia-smi lists them, are the Node's
// nvidia.com/gpu; each pod that requests some gets its own, by UUID in
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES.
//
// Every pod it runs can read what the agent can, its credential included, so
// it checks at start that its kubeconfig is a node's (system:node:<name> in
// system:nodes, which the API server's Node authorizer and NodeRestriction
// confine) and refuses anything that can do more, unless
// --allow-privileged-credentials (then it warns at start). Its credential
// files are hidden in every pod's view and no allowed host path may hold
// them; a toleration of every taint does not count as tolerating its taint
// unless --accept-wildcard-tolerations.
//
// It needs root. SIGTERM ends every pod and removes what the agent created.
//
// `trainyard-node gpu-check [flags] -- COMMAND...` runs the node's GPU path with
// no API server (discovery, allocation, a GPU pod and a CPU pod in sandboxes):
// see gpucheck.go and test/gpucheck.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/trainyard/trainyard/pkg/processnode"
	"github.com/trainyard/trainyard/pkg/version"
)

func main() {
	processnode.RunSandboxIfRequested()
	if len(os.Args) > 1 && os.Args[1] == "gpu-check" {
		os.Exit(gpuCheck(os.Args[2:]))
	}

	var cfg processnode.Config
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the API server")
	flag.StringVar(&cfg.NodeName, "node-name", "process-node", "name of the Node to register")
	flag.StringVar(&cfg.StateDir, "state-dir", "", "directory for the pods' files and logs (required)")
	flag.StringVar(&cfg.ListenAddress, "address", "127.0.0.1", "address of the kubelet API (container logs)")
	flag.IntVar(&cfg.Port, "port", 0, "port of the kubelet API; 0 picks a free one")
	flag.StringVar(&cfg.HostIP, "node-ip", "127.0.0.1", "InternalIP of the Node, where the API server reaches the kubelet API")
	flag.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "serving certificate of the kubelet API")
	flag.StringVar(&cfg.TLSKeyFile, "tls-private-key-file", "", "key of the serving certificate")
	flag.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "CA that signs the client certificates the kubelet API accepts")
	flag.StringVar(&cfg.HostAddress, "host-address", "", "address of the host on the bridge (inside --cluster-pod-cidr, outside --pod-cidr), at which pods reach the host's services such as a local manager's status server (there, and through it at the host's other addresses); empty: none")
	flag.StringVar(&cfg.Bridge, "bridge", "", "Linux bridge of the pods (default derived from --state-dir)")
	flag.StringVar(&cfg.PodCIDR, "pod-cidr", processnode.DefaultPodCIDR, "this node's pod address range")
	flag.StringVar(&cfg.ClusterPodCIDR, "cluster-pod-cidr", "", "range of every process node's pods on the bridge (default --pod-cidr)")
	flag.DurationVar(&cfg.BackoffBase, "restart-backoff", processnode.DefaultBackoffBase, "first crash-loop back-off")
	flag.DurationVar(&cfg.ShutdownGrace, "shutdown-grace", 5*time.Second, "grace period of the pods when the agent stops")
	flag.Float64Var(&cfg.CPUOvercommit, "cpu-overcommit", processnode.DefaultCPUOvercommit, "the Node advertises this many CPUs per host CPU (pods have no CPU limits; the capacity is the scheduler's budget)")
	nodeLabels := flag.String("node-labels", "", "extra node labels, k=v,k=v")
	var defaultEnv multiFlag
	flag.Var(&defaultEnv, "default-env", "NAME=VALUE set in every container's environment before its own variables (a container's value wins); repeatable")
	hostQuirks := flag.Bool("host-quirks", true, "also set what the host's software is detected to need (PET_REDIRECTS=1 PET_TEE=1 for torch 1.x on Python >= 3.11)")
	flag.StringVar(&cfg.NvidiaSMI, "nvidia-smi", "", "nvidia-smi that lists the GPUs the node advertises as nvidia.com/gpu (default: nvidia-smi on PATH, else "+processnode.DefaultNvidiaSMI+"; none found: no GPUs); a path given must work; "+processnode.NoNvidiaSMI+": no GPUs")
	registerTaint := flag.Bool("register-taint", true, "register the Node with the taint "+processnode.ProcessNodeTaint.Key+"="+processnode.ProcessNodeTaint.Value+":"+string(processnode.ProcessNodeTaint.Effect)+" and refuse every pod bound to it that does not tolerate it; false only on a cluster of one user: pods run as root on this host")
	allowedHostPaths := flag.String("allowed-host-paths", "", "comma-separated host directories under which hostPath volumes may lie (symlinks resolved); default none: a pod with a hostPath volume fails")
	flag.BoolVar(&cfg.AcceptWildcardTolerations, "accept-wildcard-tolerations", false, "count a toleration of every taint (operator Exists without a key) as tolerating the node's taint; by default a pod must name the taint's key, so that DaemonSets that tolerate everything do not run as root on this host")
	flag.BoolVar(&cfg.AllowPrivilegedCredentials, "allow-privileged-credentials", false, "run with a credential that can do more than node --node-name's (system:node:<name> in system:nodes, under the Node authorizer and NodeRestriction); every pod of the node can read it. By default the agent refuses to start with one")
	flag.BoolVar(&cfg.KeepRoots, "keep-roots", false, "keep each container's root directory (its working directory when it names none) after its pod is gone, under STATE_DIR/kept-roots, for debugging")
	showVersion := version.RegisterFlag(flag.CommandLine)
	flag.Parse()
	if showVersion.Handled(os.Stdout) {
		return
	}
	fmt.Fprintln(os.Stderr, "trainyard-node: version", version.Get())

	if cfg.StateDir == "" {
		fmt.Fprintln(os.Stderr, "trainyard-node: --state-dir is required")
		os.Exit(2)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-node:", err)
		os.Exit(1)
	}
	rc.QPS, rc.Burst = 50, 100
	if cfg.CredentialFiles, err = credentialFiles(*kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-node:", err)
		os.Exit(1)
	}
	rc.UserAgent = "trainyard-node/" + cfg.NodeName
	cfg.RESTConfig = rc
	if *nodeLabels != "" {
		cfg.Labels = map[string]string{}
		for _, kv := range strings.Split(*nodeLabels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			cfg.Labels[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	cfg.Untainted = !*registerTaint
	if *allowedHostPaths != "" {
		cfg.AllowedHostPaths = strings.Split(*allowedHostPaths, ",")
	}
	if *hostQuirks {
		for _, q := range processnode.DetectHostQuirks(processnode.DefaultHostPaths) {
			fmt.Fprintf(os.Stderr, "trainyard-node: host quirk: %s\n", q.Why)
			cfg.DefaultEnv = append(cfg.DefaultEnv, q.Env...)
		}
	}
	extra, err := processnode.ParseEnvDefaults(defaultEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-node: --default-env:", err)
		os.Exit(2)
	}
	cfg.DefaultEnv = append(cfg.DefaultEnv, extra...)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := processnode.New().Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "trainyard-node:", err)
		os.Exit(1)
	}
}

// credentialFiles are the agent's kubeconfig and the files it names for the
// current context's user (certificate, key, token file), which no pod may
// reach (processnode.Config.CredentialFiles).
func credentialFiles(kubeconfig string) ([]string, error) {
	if kubeconfig == "" {
		return nil, nil
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return nil, err
	}
	files := []string{kubeconfig}
	for _, a := range cfg.AuthInfos {
		for _, f := range []string{a.ClientCertificate, a.ClientKey, a.TokenFile} {
			if f != "" && !filepath.IsAbs(f) {
				f = filepath.Join(filepath.Dir(kubeconfig), f) // as client-go resolves them
			}
			if f != "" {
				files = append(files, f)
			}
		}
	}
	return files, nil
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }
