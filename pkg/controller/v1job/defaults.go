package v1job

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
)

// ApplyDefaults applies v1's defaults in place, the kind's last: cleanPodPolicy
// None; each role the kind's replica count and restart policy; the kind's
// port on its container (else the first) unless it has one by that name.
// It leaves replica type keys as written (Defaulted renames them in
// memory: stored, a later apply of the user's "worker" key would add a
// second spec beside "Worker").
func (d *Def) ApplyDefaults(job Job) {
	rp := job.JobRunPolicy()
	if rp.CleanPodPolicy == nil {
		rp.CleanPodPolicy = ptr.To(kubeflowv1.CleanPodPolicyNone)
	}
	for key, rs := range job.ReplicaSpecs() {
		if rs == nil {
			continue
		}
		if rs.Replicas == nil {
			n := int32(1)
			if d.DefaultReplicas != nil {
				n = d.DefaultReplicas(d.canonicalType(key))
			}
			rs.Replicas = ptr.To(n)
		}
		if rs.RestartPolicy == "" {
			rs.RestartPolicy = d.RestartPolicy
		}
		if d.PortName != "" {
			d.defaultPort(&rs.Template.Spec)
		}
	}
	if d.DefaultKind != nil {
		d.DefaultKind(job)
	}
}

// canonicalType returns the kind's role for a key in any case, "" otherwise.
func (d *Def) canonicalType(key kubeflowv1.ReplicaType) kubeflowv1.ReplicaType {
	t, _ := d.ReplicaTypeOf(string(key))
	return t
}

// ReplicaTypeOf maps a replica type in any case (a key, the lower-case
// replica-type label) to the kind's role.
func (d *Def) ReplicaTypeOf(s string) (kubeflowv1.ReplicaType, bool) {
	for _, t := range d.Roles {
		if strings.EqualFold(s, string(t)) {
			return t, true
		}
	}
	return "", false
}

// normalizeKeys renames replica type keys written in another case ("worker")
// to the kind's; a key already in the right case wins over a differently
// cased duplicate (validation reports the duplicate).
func (d *Def) normalizeKeys(specs map[kubeflowv1.ReplicaType]*kubeflowv1.ReplicaSpec) {
	for key, rs := range specs {
		c := d.canonicalType(key)
		if c == "" || c == key {
			continue
		}
		delete(specs, key)
		if _, ok := specs[c]; !ok {
			specs[c] = rs
		}
	}
}

// defaultPort adds the kind's port to its container (or the first) unless it
// has a port with that name.
func (d *Def) defaultPort(pod *corev1.PodSpec) {
	if len(pod.Containers) == 0 {
		return
	}
	c := &pod.Containers[ContainerIndex(pod, d.Container)]
	for _, p := range c.Ports {
		if p.Name == d.PortName {
			return
		}
	}
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: d.PortName, ContainerPort: d.Port})
}

// ContainerIndex is the index of the container named name, else 0.
func ContainerIndex(pod *corev1.PodSpec, name string) int {
	for i, c := range pod.Containers {
		if c.Name == name {
			return i
		}
	}
	return 0
}

// PortOf is the containerPort of the kind's port on a role's container of a
// defaulted job.
func (d *Def) PortOf(job Job, rtype kubeflowv1.ReplicaType) (int32, bool) {
	rs := job.ReplicaSpecs()[rtype]
	if rs == nil {
		return 0, false
	}
	for _, c := range rs.Template.Spec.Containers {
		if c.Name != d.Container {
			continue
		}
		for _, p := range c.Ports {
			if p.Name == d.PortName {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}
