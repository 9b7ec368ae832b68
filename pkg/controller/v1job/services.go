package v1job

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

// ServicesPlugin emits v1's headless Service per replica,
// <job>-<type>-<index>, selecting exactly that replica's pod, so that the
// addresses in the environment resolve. Not-ready pods are published: peers
// must reach each other long before any readiness probe passes.
type ServicesPlugin struct{ def *Def }

var (
	_ framework.BuildPlugin = (*ServicesPlugin)(nil)
	_ framework.OwnerPlugin = (*ServicesPlugin)(nil)
)

// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete

// Owns implements framework.OwnerPlugin.
func (*ServicesPlugin) Owns() []client.Object { return []client.Object{&corev1.Service{}} }

// Name implements framework.Plugin.
func (p *ServicesPlugin) Name() string { return p.def.Kind + "Services" }

// Build implements framework.BuildPlugin: one Service per replicated job,
// created once (its ports follow the job's spec, which does not change). The
// ports are the named ports of the replica's containers.
func (p *ServicesPlugin) Build(info *runtime.Info, req *runtime.Request) ([]plan.Child, error) {
	var out []plan.Child
	for _, rj := range info.Spec.ReplicatedJobs {
		rtype, ok := p.def.ReplicaTypeOf(rj.Template.Labels[kubeflowv1.ReplicaTypeLabel])
		if !ok {
			continue
		}
		s := rj.Template.Labels[kubeflowv1.ReplicaIndexLabel]
		i, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("replicated job %s: replica index %q: %w", rj.Name, s, err)
		}
		sel := p.def.SelectorLabels(req.Name)
		sel[kubeflowv1.ReplicaTypeLabel] = LowerType(rtype)
		sel[kubeflowv1.ReplicaIndexLabel] = s
		var ports []corev1.ServicePort
		for _, c := range rj.Template.Spec.Template.Spec.Containers {
			for _, port := range c.Ports {
				if port.Name == "" {
					continue
				}
				proto := port.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				ports = append(ports, corev1.ServicePort{Name: port.Name, Port: port.ContainerPort, Protocol: proto})
			}
		}
		out = append(out, plan.CreateOnce(&corev1.Service{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{
				Name:      ReplicaName(req.Name, rtype, i),
				Namespace: req.Namespace,
				Labels:    p.def.PodLabels(req.Name, rtype, i),
			},
			Spec: corev1.ServiceSpec{
				ClusterIP:                corev1.ClusterIPNone,
				Selector:                 sel,
				Ports:                    ports,
				PublishNotReadyAddresses: true,
			},
		}))
	}
	return out, nil
}
