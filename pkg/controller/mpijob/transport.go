package mpijob

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// SSHPublicKeyKey is the Secret key of the public key (an authorized_keys line).
const SSHPublicKeyKey = runtime.SSHPublicKeyKey

// ConfigName is the job's ConfigMap, as v1 named it: <job>-config.
func ConfigName(job string) string { return job + "-config" }

// SecretName is the job's SSH key Secret: <job>-ssh.
func SecretName(job string) string { return job + "-ssh" }

// Transport is the MPIJob plugin: the ConfigMap <job>-config (v1's hostfile
// and discover_hosts.sh; kubexec.sh, which is ssh here; the workers' sshd.sh)
// and the job's SSH key pair, a Secret made once.
type Transport struct{}

var (
	_ framework.BuildPlugin = (*Transport)(nil)
	_ framework.OwnerPlugin = (*Transport)(nil)
)

// Name implements framework.Plugin.
func (*Transport) Name() string { return "MPIJobTransport" }

// Owns implements framework.OwnerPlugin.
func (*Transport) Owns() []client.Object {
	return []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}
}

// Build implements framework.BuildPlugin. The hosts are the workers' host
// names from the runtime (<job>-worker-<i>, which their Services make
// resolvable), with the slots conversion noted on each.
func (*Transport) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	type host struct {
		name  string
		index int
		slots string
	}
	var hosts []host
	var launcher *host
	for _, rj := range info.Spec.ReplicatedJobs {
		ps := rj.Template.Spec.Template
		switch rj.Template.Labels[kubeflowv1.ReplicaTypeLabel] {
		case "worker":
			i, err := strconv.Atoi(rj.Template.Labels[kubeflowv1.ReplicaIndexLabel])
			if err != nil {
				return nil, fmt.Errorf("replicated job %s: %w", rj.Name, err)
			}
			hosts = append(hosts, host{name: ps.Spec.Hostname, index: i, slots: ps.Annotations[SlotsAnnotation]})
		case "launcher":
			if s, ok := ps.Annotations[LauncherSlotsAnnotation]; ok {
				launcher = &host{name: ps.Spec.Hostname, slots: s}
			}
		}
	}
	sort.Slice(hosts, func(a, b int) bool { return hosts[a].index < hosts[b].index })
	var hostfile, discover strings.Builder
	discover.WriteString("#!/bin/sh\n# The MPIJob's workers and their slots, one host:slots a line (Horovod's --host-discovery-script).\n")
	if launcher != nil {
		fmt.Fprintf(&hostfile, "%s slots=%s\n", launcher.name, launcher.slots)
	}
	for _, h := range hosts {
		fmt.Fprintf(&hostfile, "%s slots=%s\n", h.name, h.slots)
		fmt.Fprintf(&discover, "echo %s:%s\n", h.name, h.slots)
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigName(req.Name), Namespace: req.Namespace, Labels: Def.SelectorLabels(req.Name)},
		Data: map[string]string{
			HostfileKey: hostfile.String(),
			DiscoverKey: discover.String(),
			KubexecKey:  kubexec,
			SSHDKey:     sshd,
		},
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: SecretName(req.Name), Namespace: req.Namespace, Labels: Def.SelectorLabels(req.Name)},
		Type:       corev1.SecretTypeSSHAuth,
		Immutable:  ptr.To(true),
	}
	return []plan.Child{plan.Apply(cm), plan.CreateOnceWith(secret, runtime.FillSSHKeys)}, nil
}

// kubexec is the launcher's remote shell (OMPI_MCA_plm_rsh_agent,
// I_MPI_HYDRA_BOOTSTRAP_EXEC): `kubexec.sh HOST COMMAND...` runs COMMAND on
// the worker HOST over SSH, with the job's key. Workers start with the
// launcher, so it first waits (up to 2 minutes) for the worker's SSH server.
var kubexec = fmt.Sprintf(`#!/bin/sh
# Trainyard's MPIJob transport: run a command on a worker of this MPIJob over
# SSH (training-operator v1 ran kubectl exec here).
host="$1"
shift
opts="-p %d -i %s/id_rsa -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=5"
i=0
until ssh $opts "$host" true 2>/dev/null; do
  i=$((i + 1))
  if [ "$i" -ge 120 ]; then break; fi
  sleep 1
done
exec ssh $opts "$host" "$@"
`, SSHPort, SSHDir)

// sshd starts a worker's SSH server on port 2222 with a host key made at
// start, accepting only the job's key.
var sshd = fmt.Sprintf(`#!/bin/sh
# Trainyard's MPIJob transport: the SSH server the launcher starts this
# worker's ranks through (training-operator v1 ran sleep here and kubectl exec).
set -e
d=%[1]s
chmod 0755 %[2]s
[ -f "$d/host_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$d/host_key"
cat > "$d/sshd_config" <<CONFIG
Port %[3]d
HostKey $d/host_key
AuthorizedKeysFile %[4]s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PidFile none
CONFIG
exec /usr/sbin/sshd -De -f "$d/sshd_config"
`, SSHDRunDir, SSHDPrivSepDir, SSHPort, SSHDir)
