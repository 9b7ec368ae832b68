// Package processnode is the agent of a Trainyard process node: a Node whose pods
// really run, as processes of the machine the agent runs on. It registers the Node
// and runs its pods with virtual-kubelet (node.NodeController for registration and
// the lease, node.PodController with this package's Provider, node/api for the
// kubelet HTTP routes), so that the real scheduler, Job and JobSet controllers drive
// real processes: `make run` trains a model with torchrun across two such pods.
//
// # Policy
//
// Pods run as root on the host (below): this is a development node. Unless
// Config.Untainted (trainyard-node --register-taint=false, which the local
// cluster of one user passes), the Node carries ProcessNodeTaint,
// trainyard.io/process-node=true:NoSchedule, and a pod bound to it that does
// not tolerate its NoSchedule and NoExecute taints fails before anything of
// it runs (ReasonTaintNotTolerated), DaemonSet pods and pods that name
// spec.nodeName included. hostPath volumes are honoured only under
// Config.AllowedHostPaths (--allowed-host-paths; default none), symlinks
// resolved, before and after a path is created; others fail the pod
// (ReasonHostPathNotAllowed). See admission.go and docs/processnode.md.
//
// # Images
//
// Images are not pulled and not used: a container's command and args (with $(VAR)
// expanded) run on the host, with the host's programs, libraries and files. A
// container must therefore name its command; the image field may name anything
// (the examples keep a real PyTorch image, ignored here).
//
// # Isolation
//
// Every pod gets a sandbox process (the agent binary again, see
// RunSandboxIfRequested) that is PID 1 of the pod's own PID namespace and lives in
// the pod's own network, mount, UTS and IPC namespaces:
//
//   - Network: a veth pair, "eth0" in the pod with an address of the node's pod
//     range (default 10.254.0.0/24, a private range created on this machine only),
//     the other end on a Linux bridge without an address. Nothing routes to or from
//     the bridge: pods reach each other and nothing else, so two TrainJobs both
//     listen on port 29500. With Config.HostAddress the bridge has that address
//     and pods route through it to the host's own addresses too (a local
//     manager's status server), and to nothing beyond the host. iproute2's
//     `ip` and util-linux's `nsenter` do the work.
//   - Names: the pod's hostname (spec.hostname, else its name) is set in its UTS
//     namespace, and a hosts file generated per pod is bind mounted on /etc/hosts:
//     the pod's own names, and every running pod of the process nodes with a
//     subdomain as cluster DNS names it, <hostname>.<subdomain>.<ns>.svc.cluster.local
//     and, in the same namespace, <hostname>.<subdomain> (the JobSet's
//     <job>-node-0-0.<job>); and every headless Service with ready endpoints on the
//     process nodes (from its EndpointSlices), <name>.<ns>.svc.cluster.local and
//     <name>.<ns>, and in the same namespace <name> (a PyTorchJob's
//     <job>-master-0), once per address. The files are rewritten in place whenever
//     a pod gets or loses its address or a Service its endpoints.
//   - Files: the mount namespace is private. Volumes (emptyDir, configMap, secret,
//     downwardAPI, projected with serviceAccountToken, hostPath) are bind mounted at
//     their mountPaths, subPath included. A mountPath or workingDir that does not
//     exist on the host is not created there: its parent is replaced, in the pod's
//     namespace only, by a tmpfs holding bind mounts of all its entries (for "/",
//     by pivoting into such a tmpfs), and the new directory lives in that tmpfs.
//     A container that names no workingDir starts in a root directory of its
//     own (the pod's directory on the host, roots/<container>), empty at each
//     run as a fresh container's image root is, so that relative paths (the
//     Kubeflow SDK's script.py, a guide's ./data) never reach the host's "/"
//     nor another pod; it is removed with the pod (Config.KeepRoots keeps it).
//     Absolute paths are the host's, as before. /proc is the pod's own.
//   - Environment: the host's programs run, not an image's, so what they need
//     to run upstream-shaped pods unchanged is the node's business:
//     Config.DefaultEnv starts every container's environment (a container's
//     own value wins); trainyard-node fills it from DetectHostQuirks.
//   - Processes: each container runs in its own process group; when its main
//     process ends, the rest of the group is killed. When the sandbox ends, the
//     kernel kills whatever is left in the pod.
//
// # GPUs
//
// The agent lists the host's NVIDIA GPUs once, at start, with `nvidia-smi
// --query-gpu=index,uuid,name,memory.total --format=csv,noheader`
// (Config.NvidiaSMI, trainyard-node --nvidia-smi; by default nvidia-smi on
// PATH, else /usr/local/nvidia/bin/nvidia-smi; without either the node has
// no GPUs, as its log says; "none" turns discovery off). The Node advertises
// them as nvidia.com/gpu, capacity and allocatable, with the labels NVIDIA's
// GPU feature discovery sets: nvidia.com/gpu.product (the first GPU's name,
// spaces replaced by '-'), nvidia.com/gpu.memory (its MiB) and
// nvidia.com/gpu.count. MIG devices are not advertised: nvidia-smi lists a
// GPU in MIG mode as one GPU, and it is given whole, which CUDA cannot use
// without a MIG device.
//
// A pod's containers get distinct GPUs for the pod's life, counted as by the
// kubelet's device manager: the pod holds the most of any init container or
// the sum of its containers, whichever is more; each container has its own,
// and init containers (one at a time, before them) reuse the pod's. A
// container sees its GPUs by UUID in CUDA_VISIBLE_DEVICES and
// NVIDIA_VISIBLE_DEVICES, set after its own environment so that its own
// values never widen them; a container without GPUs gets
// CUDA_VISIBLE_DEVICES empty and NVIDIA_VISIBLE_DEVICES=void. There is no
// device cgroup: these variables are the whole isolation, and a program that
// ignores them (or opens /dev/nvidia* itself) reaches every GPU. The pod is
// annotated trainyard.io/gpus=<container>=<uuid>,<uuid>;… (package gpus,
// which `trainyard get` reads). virtual-kubelet writes a pod's status by
// updating pods/status with the provider's whole pod, whose annotations the
// API server keeps, so the annotation goes with the status rather than in a
// patch that the next status update would undo.
//
// The GPUs of each pod are recorded in StateDir/gpus.json, replaced
// atomically at each change. A pod that ends (Succeeded, Failed, deleted)
// frees its GPUs; an agent that stops does not (the pods have not ended for
// the API server): the next agent gives each pod it runs again the GPUs it
// had, none of them to another pod meanwhile, and once it has listed the pods
// bound to its node, frees those of pods gone, finished or being deleted. A
// pod asking for more GPUs than are free (the scheduler counts them, so only
// when the two disagree) fails with reason UnexpectedAdmissionError, as with
// the kubelet.
//
// Everything the agent writes lives in its state directory. On stop it ends every
// pod (SIGTERM, then SIGKILL after its grace period, capped by ShutdownGrace) and
// removes the veths and, once no other process node uses it, the bridge.
//
// # Kubelet behaviour
//
// Implemented: env (value, $(VAR) expansion, envFrom, fieldRef: metadata.name,
// namespace, uid, labels, annotations and their ['key'] forms, spec.nodeName,
// spec.serviceAccountName, status.podIP(s), status.hostIP(s); resourceFieldRef;
// configMapKeyRef; secretKeyRef; optional references), command/args expansion,
// workingDir, init containers in order, restartPolicy Always/OnFailure/Never with
// the crash-loop back-off (immediate, then 10s doubling to 5m), pod phase and
// container states with exit codes (128+signal for a signal, 128 StartError when
// the command cannot be started), CreateContainerConfigError while a ConfigMap or
// Secret is missing, activeDeadlineSeconds (Failed/DeadlineExceeded), deletion
// (SIGTERM to the process group, the deletion's grace period, SIGKILL, then the
// pod is removed from the API server), hostNetwork pods, tcpSocket readiness
// probes (dialled from the pod's network namespace; ready only once the port
// accepts), and the kubelet API's
// containerLogs (kubectl logs, -f, --previous, --tail, --timestamps, --since,
// --limit-bytes) over HTTPS with client certificates.
//
// Not implemented: images and image pull policy, resource limits (no cgroups: a
// pod may use the whole machine, GPUs are kept apart by the environment only; so the Node advertises DefaultCPUOvercommit
// CPUs per host CPU, --cpu-overcommit, and a TrainJob asking for more CPUs than
// the machine has runs with its pods sharing the cores), liveness and startup
// probes and readiness probes other than tcpSocket (a running container is ready),
// lifecycle hooks, restartable init containers (sidecars), securityContext (pods run
// as root with the host's capabilities), exec/attach/port-forward, metrics and
// stats, service links and KUBERNETES_SERVICE_* (Service IPs are unreachable),
// DNS for Services with a cluster IP (only headless Services and pods' hostnames
// resolve), updates of ConfigMap and Secret volumes after the start,
// PersistentVolumeClaims and other volume types, separate
// mount namespaces per container (the pod's containers share one), and the
// termination message of the File policy (FallbackToLogsOnError is: a failed
// container's message is the end of its log).
package processnode
