package processnode

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultPath is the PATH of a container that sets none, as container runtimes give
// an image without one. It also keeps the host's per-user shims (pyenv, …) out of
// the pods: `python3` is the system interpreter.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Sources gives env and volume resolution the objects a pod refers to.
type Sources interface {
	ConfigMap(namespace, name string) (*corev1.ConfigMap, error)
	Secret(namespace, name string) (*corev1.Secret, error)
}

// PodRef is what the environment of one pod on this node draws on beyond the pod
// object: what its downward API can see, and the node's defaults.
type PodRef struct {
	Pod    *corev1.Pod
	PodIP  string
	HostIP string
	// NodeAllocatable backs resourceFieldRef limits of containers without limits.
	NodeAllocatable corev1.ResourceList
	// DefaultEnv is the node's Config.DefaultEnv: set before the container's
	// envFrom and env, which override it.
	DefaultEnv []corev1.EnvVar
}

// ConfigError is a container configuration that cannot be resolved yet (a missing
// ConfigMap, Secret or key); the kubelet reports it as CreateContainerConfigError
// and retries.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

func configErrorf(format string, args ...interface{}) error {
	return &ConfigError{Msg: fmt.Sprintf(format, args...)}
}

// ContainerEnv returns the environment of container c as NAME=VALUE pairs, the way
// the kubelet builds it: envFrom in order, then env in order (later entries win),
// with $(VAR) references to earlier variables expanded, and valueFrom resolved
// (fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef). PATH defaults to
// DefaultPath and HOSTNAME to the pod's hostname, as a container runtime does,
// and the node's DefaultEnv comes next, as an image's ENV would.
// Service links (FOO_SERVICE_HOST) and KUBERNETES_SERVICE_* are not set: the pods
// of a process node cannot reach Service IPs.
func ContainerEnv(ref PodRef, c *corev1.Container, src Sources) ([]string, error) {
	pod := ref.Pod
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	set("PATH", DefaultPath)
	set("HOSTNAME", PodHostname(pod))
	for _, e := range ref.DefaultEnv {
		set(e.Name, e.Value)
	}

	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			optional := ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional
			cm, err := src.ConfigMap(pod.Namespace, ef.ConfigMapRef.Name)
			if err != nil {
				if optional {
					continue
				}
				return nil, configErrorf("configmap %q not found", ef.ConfigMapRef.Name)
			}
			keys := sortedKeys(cm.Data)
			for _, k := range keys {
				set(ef.Prefix+k, cm.Data[k])
			}
		case ef.SecretRef != nil:
			optional := ef.SecretRef.Optional != nil && *ef.SecretRef.Optional
			s, err := src.Secret(pod.Namespace, ef.SecretRef.Name)
			if err != nil {
				if optional {
					continue
				}
				return nil, configErrorf("secret %q not found", ef.SecretRef.Name)
			}
			for _, k := range sortedKeys(s.Data) {
				set(ef.Prefix+k, string(s.Data[k]))
			}
		}
	}

	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, Expand(e.Value, func(name string) (string, bool) {
				v, ok := vars[name]
				return v, ok
			}))
			continue
		}
		v, skip, err := envValueFrom(ref, c, e.ValueFrom, src)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if !skip {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

// envValueFrom resolves one valueFrom; skip reports an optional reference that is absent.
func envValueFrom(ref PodRef, c *corev1.Container, vf *corev1.EnvVarSource, src Sources) (string, bool, error) {
	pod := ref.Pod
	switch {
	case vf.FieldRef != nil:
		v, err := FieldValue(ref, vf.FieldRef.FieldPath)
		return v, false, err
	case vf.ResourceFieldRef != nil:
		v, err := ResourceValue(ref, c, vf.ResourceFieldRef)
		return v, false, err
	case vf.ConfigMapKeyRef != nil:
		r := vf.ConfigMapKeyRef
		optional := r.Optional != nil && *r.Optional
		cm, err := src.ConfigMap(pod.Namespace, r.Name)
		if err != nil {
			if optional {
				return "", true, nil
			}
			return "", false, configErrorf("configmap %q not found", r.Name)
		}
		if v, ok := cm.Data[r.Key]; ok {
			return v, false, nil
		}
		if v, ok := cm.BinaryData[r.Key]; ok {
			return string(v), false, nil
		}
		if optional {
			return "", true, nil
		}
		return "", false, configErrorf("couldn't find key %s in ConfigMap %s/%s", r.Key, pod.Namespace, r.Name)
	case vf.SecretKeyRef != nil:
		r := vf.SecretKeyRef
		optional := r.Optional != nil && *r.Optional
		s, err := src.Secret(pod.Namespace, r.Name)
		if err != nil {
			if optional {
				return "", true, nil
			}
			return "", false, configErrorf("secret %q not found", r.Name)
		}
		if v, ok := s.Data[r.Key]; ok {
			return string(v), false, nil
		}
		if optional {
			return "", true, nil
		}
		return "", false, configErrorf("couldn't find key %s in Secret %s/%s", r.Key, pod.Namespace, r.Name)
	}
	return "", false, fmt.Errorf("unsupported valueFrom")
}

// FieldValue resolves a downward-API field path of the pod: metadata.name,
// metadata.namespace, metadata.uid, metadata.labels, metadata.annotations,
// metadata.labels['k'], metadata.annotations['k'], spec.nodeName,
// spec.serviceAccountName, status.hostIP(s), status.podIP(s). A missing label or
// annotation is the empty string, as in the kubelet.
func FieldValue(ref PodRef, path string) (string, error) {
	pod := ref.Pod
	if name, key, ok := splitSubscript(path); ok {
		switch name {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("unsupported fieldPath %q", path)
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return ref.HostIP, nil
	case "status.podIP", "status.podIPs":
		return ref.PodIP, nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// splitSubscript splits "metadata.labels['key']" into "metadata.labels" and "key".
func splitSubscript(path string) (string, string, bool) {
	i := strings.Index(path, "[")
	if i < 0 || !strings.HasSuffix(path, "]") {
		return "", "", false
	}
	inner := path[i+1 : len(path)-1]
	if len(inner) < 2 {
		return "", "", false
	}
	if q := inner[0]; (q != '\'' && q != '"') || inner[len(inner)-1] != q {
		return "", "", false
	}
	return path[:i], inner[1 : len(inner)-1], true
}

// formatMap renders labels or annotations as the downward API does: sorted
// key="value" lines, values quoted.
func formatMap(m map[string]string) string {
	var lines []string
	for _, k := range sortedKeys(m) {
		lines = append(lines, fmt.Sprintf("%s=%s", k, strconv.Quote(m[k])))
	}
	return strings.Join(lines, "\n")
}

// ResourceValue resolves a resourceFieldRef: requests.* and limits.* of cpu, memory
// and ephemeral-storage, divided by the divisor (default 1) and rounded up. A limit
// that is not set is the node's allocatable amount, as in the kubelet.
func ResourceValue(ref PodRef, c *corev1.Container, r *corev1.ResourceFieldSelector) (string, error) {
	target := c
	if r.ContainerName != "" && r.ContainerName != c.Name {
		target = nil
		for i := range ref.Pod.Spec.Containers {
			if ref.Pod.Spec.Containers[i].Name == r.ContainerName {
				target = &ref.Pod.Spec.Containers[i]
			}
		}
		if target == nil {
			return "", fmt.Errorf("container %q not found", r.ContainerName)
		}
	}
	kind, res, ok := strings.Cut(r.Resource, ".")
	if !ok {
		// "limits.cpu" is the canonical form; a bare "cpu" means limits.
		kind, res = "limits", r.Resource
	}
	name := corev1.ResourceName(res)
	var q resource.Quantity
	var found bool
	switch kind {
	case "limits":
		q, found = target.Resources.Limits[name]
		if !found {
			q, found = ref.NodeAllocatable[name]
		}
	case "requests":
		q, found = target.Resources.Requests[name]
		if !found && name == corev1.ResourceCPU {
			q, found = resource.MustParse("0"), true
		}
	default:
		return "", fmt.Errorf("unsupported resource %q", r.Resource)
	}
	if !found {
		return "0", nil
	}
	divisor := r.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == corev1.ResourceCPU {
		v := math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
		return strconv.FormatInt(int64(v), 10), nil
	}
	v := math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	return strconv.FormatInt(int64(v), 10), nil
}

// Expand replaces $(NAME) in s by lookup(NAME) when it is defined, and $$ by $, the
// kubelet's rules for env values, command and args: an undefined $(NAME) stays as
// it is, and $$(NAME) is the literal $(NAME).
func Expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; next {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// EnvLookup returns a lookup function over NAME=VALUE pairs, for Expand.
func EnvLookup(env []string) func(string) (string, bool) {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// CommandLine returns the argv a container runs: command then args, each with
// $(VAR) expanded against the container's environment. A process node has no
// image, so a container must name its command.
func CommandLine(c *corev1.Container, env []string) ([]string, error) {
	if len(c.Command) == 0 {
		return nil, fmt.Errorf("container %q has no command: a process node runs command+args on the host and does not know the entrypoint of image %q", c.Name, c.Image)
	}
	lookup := EnvLookup(env)
	argv := make([]string, 0, len(c.Command)+len(c.Args))
	for _, a := range c.Command {
		argv = append(argv, Expand(a, lookup))
	}
	for _, a := range c.Args {
		argv = append(argv, Expand(a, lookup))
	}
	return argv, nil
}

// PodHostname is the hostname a pod's containers see: spec.hostname, else the pod
// name, cut to 63 characters as by the kubelet.
func PodHostname(pod *corev1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
