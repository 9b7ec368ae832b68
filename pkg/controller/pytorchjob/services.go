package pytorchjob

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubeflowv1 "github.com/trainyard/trainyard/apis/kubeflow/v1"
	"github.com/trainyard/trainyard/pkg/plan"
	"github.com/trainyard/trainyard/pkg/runtime"
	"github.com/trainyard/trainyard/pkg/runtime/framework"
)

// ServicesPluginName is the name of the plugin that emits the Services.
const ServicesPluginName = "PyTorchJobServices"

// ServicesPlugin emits v1's headless Service per replica, <job>-<type>-<index>,
// selecting exactly that replica's pod, so that MASTER_ADDR (<job>-master-0)
// and the elastic rendezvous host (<job>-worker-0) resolve. Not-ready pods are
// published: the master must be reachable while the workers wait for it, long
// before any readiness probe passes.
type ServicesPlugin struct{}

var (
	_ framework.BuildPlugin = (*ServicesPlugin)(nil)
	_ framework.OwnerPlugin = (*ServicesPlugin)(nil)
)

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete

// Owns implements framework.OwnerPlugin.
func (*ServicesPlugin) Owns() []client.Object { return []client.Object{&corev1.Service{}} }

// NewServicesPlugin returns the plugin. It reads each replica's role, index
// and master mark from the labels conversion put on its pod template.
func NewServicesPlugin() *ServicesPlugin { return &ServicesPlugin{} }

// Name implements framework.Plugin.
func (*ServicesPlugin) Name() string { return ServicesPluginName }

// Build implements framework.BuildPlugin. The ports are the named ports of the
// pytorch container of the replica, as the pipeline left it. A Service is
// created once and then left as it is (its ports follow the job's spec, which
// does not change).
func (p *ServicesPlugin) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	var out []plan.Child
	for _, rj := range info.Spec.ReplicatedJobs {
		rtype, ok := ReplicaTypeOf(rj.Template.Labels[kubeflowv1.ReplicaTypeLabel])
		if !ok {
			continue
		}
		ports := servicePorts(&rj.Template.Spec.Template.Spec)
		s, ok := rj.Template.Labels[kubeflowv1.ReplicaIndexLabel]
		if !ok {
			return nil, fmt.Errorf("replicated job %s has no %s label", rj.Name, kubeflowv1.ReplicaIndexLabel)
		}
		i, err := strconv.Atoi(s)
		if err != nil {
			return nil, err
		}
		sel := SelectorLabels(req.Name)
		sel[kubeflowv1.ReplicaTypeLabel] = lowerType(rtype)
		sel[kubeflowv1.ReplicaIndexLabel] = s
		isMaster := rj.Template.Spec.Template.Labels[kubeflowv1.JobRoleLabel] == MasterRole
		out = append(out, plan.CreateOnce(service(req, rtype, i, isMaster, sel, ports)))
	}
	return out, nil
}

func service(req *runtime.Request, rtype kubeflowv1.ReplicaType, index int, isMaster bool, selector map[string]string, ports []corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      ReplicaName(req.Name, rtype, index),
			Namespace: req.Namespace,
			Labels:    PodLabels(req.Name, rtype, index, isMaster),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 selector,
			Ports:                    ports,
			PublishNotReadyAddresses: true,
		},
	}
}

func servicePorts(pod *corev1.PodSpec) []corev1.ServicePort {
	var out []corev1.ServicePort
	for _, c := range pod.Containers {
		if c.Name != kubeflowv1.PyTorchJobDefaultContainerName {
			continue
		}
		for _, port := range c.Ports {
			if port.Name == "" {
				continue
			}
			out = append(out, corev1.ServicePort{Name: port.Name, Port: port.ContainerPort, Protocol: protocol(port.Protocol)})
		}
	}
	return out
}

func protocol(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}
