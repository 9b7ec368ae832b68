package runtime

import "fmt"

// DefaultClusterDomain is the DNS domain of most clusters (the kubelet's
// --cluster-domain, cluster DNS's zone).
const DefaultClusterDomain = "cluster.local"

// Subdomain is the DNS subdomain under which JobSet publishes a job's pods:
// the runtime's network.subdomain, else the JobSet's name (the job's).
func (i *Info) Subdomain(req *Request) string {
	if n := i.Spec.Network; n != nil && n.Subdomain != "" {
		return n.Subdomain
	}
	return req.Name
}

// MasterAddr is the DNS name of the trainer job's first pod, where every
// framework's coordinator (torch's master, JAX's coordinator, XGBoost's
// tracker) listens: JobSet names pods
// <jobset>-<replicated job>-<job index>-<pod index> and publishes them under
// Subdomain.
func (i *Info) MasterAddr(req *Request) string {
	return fmt.Sprintf("%s-%s-0-0.%s", req.Name, i.TrainerJob, i.Subdomain(req))
}
