package processnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
)

// TokenSource issues service account tokens for projected volumes.
type TokenSource interface {
	Token(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error)
}

// volumeFile is one file of a configMap, secret, downwardAPI or projected volume.
type volumeFile struct {
	path string // relative
	data []byte
	mode os.FileMode
}

// volumeSource is where a volume lies on the host: below the directory root,
// at rel ("." for root itself). Mounts of it, and of paths below it
// (subPath), are resolved beneath root (beneath.go).
type volumeSource struct {
	root, rel string
}

// materializeVolumes writes the pod's file-backed volumes below dir/volumes and
// returns, per volume, where its mounts come from, plus the tmpfs mounts of
// memory-backed emptyDirs. Supported: emptyDir, configMap, secret, downwardAPI,
// projected (configMap, secret, downwardAPI, serviceAccountToken) and hostPath,
// whose path must lie under one of hostRoots (Config.AllowedHostPaths).
// Contents are written once, when the pod starts; later changes of a ConfigMap
// or Secret do not reach a running pod. Service account tokens are renewed
// (renewTokens).
func materializeVolumes(ctx context.Context, ref PodRef, dir string, src Sources, tokens TokenSource, hostRoots []string) (map[string]volumeSource, []mountSpec, error) {
	pod := ref.Pod
	paths := map[string]volumeSource{}
	var tmpfs []mountSpec
	for _, v := range pod.Spec.Volumes {
		vdir := filepath.Join(dir, "volumes", v.Name)
		switch {
		case v.EmptyDir != nil:
			if err := os.MkdirAll(vdir, 0o777); err != nil {
				return nil, nil, err
			}
			_ = os.Chmod(vdir, 0o777)
			if v.EmptyDir.Medium == corev1.StorageMediumMemory {
				tmpfs = append(tmpfs, mountSpec{Target: vdir, Tmpfs: true})
			}
			paths[v.Name] = volumeSource{root: vdir, rel: "."}
		case v.HostPath != nil:
			vs, err := hostPathVolume(v.Name, v.HostPath, hostRoots)
			if err != nil {
				return nil, nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			paths[v.Name] = vs
		case v.ConfigMap != nil, v.Secret != nil, v.DownwardAPI != nil, v.Projected != nil:
			files, err := volumeFiles(ctx, ref, v, src, tokens)
			if err != nil {
				return nil, nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := writeVolume(vdir, files); err != nil {
				return nil, nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			paths[v.Name] = volumeSource{root: vdir, rel: "."}
		default:
			return nil, nil, &unsupportedError{fmt.Sprintf("volume %s: only emptyDir, configMap, secret, downwardAPI, projected and hostPath volumes are supported on a process node", v.Name)}
		}
	}
	return paths, tmpfs, nil
}

type unsupportedError struct{ msg string }

func (e *unsupportedError) Error() string { return e.msg }

func modeOr(m *int32, def int32) os.FileMode {
	if m != nil {
		return os.FileMode(*m)
	}
	return os.FileMode(def)
}

// keyFiles maps the keys of a ConfigMap or Secret to files, per items when given.
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, mode os.FileMode, what string, optional bool) ([]volumeFile, error) {
	var files []volumeFile
	if len(items) == 0 {
		for _, k := range sortedKeys(data) {
			files = append(files, volumeFile{path: k, data: data[k], mode: mode})
		}
		return files, nil
	}
	for _, it := range items {
		d, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, &ConfigError{Msg: fmt.Sprintf("configmap or secret %s has no key %q", what, it.Key)}
		}
		files = append(files, volumeFile{path: it.Path, data: d, mode: modeOr(it.Mode, int32(mode))})
	}
	return files, nil
}

func configMapFiles(src Sources, ns string, name string, items []corev1.KeyToPath, optional *bool, mode os.FileMode) ([]volumeFile, error) {
	opt := optional != nil && *optional
	cm, err := src.ConfigMap(ns, name)
	if err != nil {
		if opt {
			return nil, nil
		}
		return nil, &ConfigError{Msg: fmt.Sprintf("configmap %q not found", name)}
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles(data, items, mode, name, opt)
}

func secretFiles(src Sources, ns, name string, items []corev1.KeyToPath, optional *bool, mode os.FileMode) ([]volumeFile, error) {
	opt := optional != nil && *optional
	s, err := src.Secret(ns, name)
	if err != nil {
		if opt {
			return nil, nil
		}
		return nil, &ConfigError{Msg: fmt.Sprintf("secret %q not found", name)}
	}
	return keyFiles(s.Data, items, mode, name, opt)
}

func downwardFiles(ref PodRef, items []corev1.DownwardAPIVolumeFile, mode os.FileMode) ([]volumeFile, error) {
	var files []volumeFile
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = FieldValue(ref, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := &corev1.Container{}
			if len(ref.Pod.Spec.Containers) > 0 {
				c = &ref.Pod.Spec.Containers[0]
			}
			v, err = ResourceValue(ref, c, it.ResourceFieldRef)
		}
		if err != nil {
			return nil, err
		}
		files = append(files, volumeFile{path: it.Path, data: []byte(v), mode: modeOr(it.Mode, int32(mode))})
	}
	return files, nil
}

func volumeFiles(ctx context.Context, ref PodRef, v corev1.Volume, src Sources, tokens TokenSource) ([]volumeFile, error) {
	ns := ref.Pod.Namespace
	switch {
	case v.ConfigMap != nil:
		return configMapFiles(src, ns, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, modeOr(v.ConfigMap.DefaultMode, 0o644))
	case v.Secret != nil:
		return secretFiles(src, ns, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, modeOr(v.Secret.DefaultMode, 0o644))
	case v.DownwardAPI != nil:
		return downwardFiles(ref, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode, 0o644))
	}
	mode := modeOr(v.Projected.DefaultMode, 0o644)
	var all []volumeFile
	for _, s := range v.Projected.Sources {
		var files []volumeFile
		var err error
		switch {
		case s.ConfigMap != nil:
			files, err = configMapFiles(src, ns, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, mode)
		case s.Secret != nil:
			files, err = secretFiles(src, ns, s.Secret.Name, s.Secret.Items, s.Secret.Optional, mode)
		case s.DownwardAPI != nil:
			files, err = downwardFiles(ref, s.DownwardAPI.Items, mode)
		case s.ServiceAccountToken != nil:
			var tok string
			if tokens != nil {
				// Retried, as the kubelet retries a mount: a node's
				// credential may get a token for a pod only once the API
				// server's Node authorizer has seen it bound here, which
				// can lag the pod's binding by a moment.
				if tok, err = tokens.Token(ctx, ref.Pod, s.ServiceAccountToken); err != nil {
					err = &ConfigError{Msg: fmt.Sprintf("service account token: %v", err)}
				}
			}
			files = []volumeFile{{path: s.ServiceAccountToken.Path, data: []byte(tok), mode: mode}}
		default:
			err = &unsupportedError{"projected volume source not supported on a process node"}
		}
		if err != nil {
			return nil, err
		}
		all = append(all, files...)
	}
	return all, nil
}

// writeVolume replaces dir's content by files.
func writeVolume(dir string, files []volumeFile) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		rel := filepath.Clean(f.path)
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("invalid path %q", f.path)
		}
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode.Perm()); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode.Perm()); err != nil {
			return err
		}
	}
	return nil
}

// mountPlan returns the pod's mounts for its containers' volumeMounts (sources
// from volumes; subPath and subPathExpr below them, resolved beneath the
// volume: a subPath that leaves it, through ".." or a symlink, fails the pod,
// and a missing one is made a directory of the volume, as the kubelet does),
// the hosts file on /etc/hosts unless hostsFile is empty, and the tmpfs mounts
// of memory-backed emptyDirs first. Two containers may mount the same thing at
// the same path; a path mounted differently by two containers is an error:
// all containers of a pod share one mount namespace here.
func mountPlan(pod *corev1.Pod, volumes map[string]volumeSource, envs map[string][]string, hostsFile string, tmpfs []mountSpec) ([]mountSpec, error) {
	plan := append([]mountSpec(nil), tmpfs...)
	byTarget := map[string]mountSpec{}
	var targets []string
	all := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, vm := range c.VolumeMounts {
			vs, ok := volumes[vm.Name]
			if !ok {
				return nil, fmt.Errorf("container %s mounts unknown volume %q", c.Name, vm.Name)
			}
			sub := vm.SubPath
			if vm.SubPathExpr != "" {
				sub = Expand(vm.SubPathExpr, EnvLookup(envs[c.Name]))
			}
			rel := vs.rel
			if sub != "" {
				clean, err := cleanRel(sub)
				if err != nil {
					return nil, &ConfigError{Msg: fmt.Sprintf("container %s: invalid subPath: %v", c.Name, err)}
				}
				rel = filepath.Join(rel, clean)
			}
			fd, err := openBeneath(vs.root, rel, sub != "")
			if err != nil {
				if errors.Is(err, errOutside) {
					return nil, &ConfigError{Msg: fmt.Sprintf("container %s: volume %s: subPath %q %v", c.Name, vm.Name, sub, errOutside)}
				}
				return nil, fmt.Errorf("container %s: volume %s: %w", c.Name, vm.Name, err)
			}
			mode, err := statFD(fd)
			_ = unix.Close(fd)
			if err != nil {
				return nil, fmt.Errorf("container %s: volume %s: %w", c.Name, vm.Name, err)
			}
			m := mountSpec{Source: vs.root, SubPath: rel, Target: filepath.Clean(vm.MountPath), ReadOnly: vm.ReadOnly, File: !mode.IsDir()}
			if m.SubPath == "." {
				m.SubPath = ""
			}
			if prev, ok := byTarget[m.Target]; ok {
				if prev.Source != m.Source || prev.SubPath != m.SubPath {
					return nil, fmt.Errorf("%s is mounted from two different sources by the pod's containers; a process node gives all containers of a pod one mount namespace", m.Target)
				}
				if !m.ReadOnly && prev.ReadOnly {
					prev.ReadOnly = false
					byTarget[m.Target] = prev
				}
				continue
			}
			byTarget[m.Target] = m
			targets = append(targets, m.Target)
		}
	}
	sort.Strings(targets)
	for _, t := range targets {
		plan = append(plan, byTarget[t])
	}
	if hostsFile != "" {
		if _, taken := byTarget["/etc/hosts"]; !taken {
			plan = append(plan, mountSpec{Source: hostsFile, Target: "/etc/hosts", File: true})
		}
	}
	return plan, nil
}

// apiTokens issues tokens with the TokenRequest API, bound to the pod.
type apiTokens struct {
	create func(ctx context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
}

func (t apiTokens) Token(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		tr.Spec.Audiences = []string{src.Audience}
	}
	out, err := t.create(ctx, pod.Namespace, sa, tr)
	if err != nil {
		return "", err
	}
	return out.Status.Token, nil
}
