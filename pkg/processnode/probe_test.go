package processnode

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestProbeAddr(t *testing.T) {
	c := &corev1.Container{Name: "node", Ports: []corev1.ContainerPort{{Name: "ssh", ContainerPort: 2222}}}
	cases := map[string]struct {
		action  corev1.TCPSocketAction
		want    string
		wantErr bool
	}{
		"a port number, on the pod's IP": {action: corev1.TCPSocketAction{Port: intstr.FromInt32(2222)}, want: "10.254.0.7:2222"},
		"a named port":                   {action: corev1.TCPSocketAction{Port: intstr.FromString("ssh")}, want: "10.254.0.7:2222"},
		"the probe's host":               {action: corev1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt32(80)}, want: "127.0.0.1:80"},
		"an unknown port name":           {action: corev1.TCPSocketAction{Port: intstr.FromString("http")}, wantErr: true},
		"port 0":                         {action: corev1.TCPSocketAction{Port: intstr.FromInt32(0)}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ProbeAddr(c, &tc.action, "10.254.0.7")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("ProbeAddr = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
