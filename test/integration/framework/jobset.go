package framework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetwebhooks "sigs.k8s.io/jobset/pkg/webhooks"
)

// startJobSetWebhooks runs JobSet's own admission webhooks for JobSets (the
// code of sigs.k8s.io/jobset/pkg/webhooks, which the jobset-controller
// serves) in a manager of their own, as JobSet's process would, on a local
// port of its own with the env's serving certificate, and registers JobSet's
// webhook configurations for JobSets (from the module's
// config/components/webhook) pointing at it. JobSet's pod webhooks are left
// out: no JobSet controller makes pods here. These webhooks are what keeps a
// suspended JobSet's template immutable but for the fields Kueue changes.
func (e *Env) startJobSetWebhooks(jobsetDir string) error {
	wo := e.env.WebhookInstallOptions
	port, err := freePort()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(e.Config, TestManagerOptions(ctrl.Options{
		Scheme:        e.Scheme,
		WebhookServer: webhook.NewServer(webhook.Options{Host: wo.LocalServingHost, Port: port, CertDir: wo.LocalServingCertDir}),
	}))
	if err != nil {
		return fmt.Errorf("JobSet webhook manager: %w", err)
	}
	if err := jobsetwebhooks.Setup(mgr); err != nil {
		return fmt.Errorf("JobSet webhooks: %w", err)
	}
	e.stopJobSet = RunManager(mgr, "JobSet webhooks")
	if err := waitWebhookServer(mgr, "JobSet webhook server"); err != nil {
		return err
	}
	base := "https://" + net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(port))
	if err := e.installJobSetWebhookConfigs(filepath.Join(jobsetDir, "config", "components", "webhook", "manifests.yaml"), base, wo.LocalServingCAData); err != nil {
		return err
	}
	return e.waitJobSetImmutability()
}

// installJobSetWebhookConfigs creates JobSet's webhook configurations, kept to
// the webhooks on JobSets, calling base<path> with caBundle.
func (e *Env) installJobSetWebhookConfigs(file, base string, caBundle []byte) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("JobSet webhook manifests: %w", err)
	}
	onJobSets := func(rules []admissionv1.RuleWithOperations) bool {
		for _, r := range rules {
			for _, res := range r.Resources {
				if res == "jobsets" {
					return true
				}
			}
		}
		return false
	}
	url := func(cc *admissionv1.WebhookClientConfig) {
		u := base + ptr.Deref(cc.Service.Path, "/")
		*cc = admissionv1.WebhookClientConfig{URL: &u, CABundle: caBundle}
	}
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("JobSet webhook manifests: %w", err)
		}
		var meta metav1.TypeMeta
		if err := utilyaml.Unmarshal(doc, &meta); err != nil {
			return err
		}
		var obj client.Object
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			var c admissionv1.MutatingWebhookConfiguration
			if err := utilyaml.Unmarshal(doc, &c); err != nil {
				return err
			}
			var kept []admissionv1.MutatingWebhook
			for _, w := range c.Webhooks {
				if onJobSets(w.Rules) {
					url(&w.ClientConfig)
					kept = append(kept, w)
				}
			}
			obj = &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "jobset-" + c.Name}, Webhooks: kept}
		case "ValidatingWebhookConfiguration":
			var c admissionv1.ValidatingWebhookConfiguration
			if err := utilyaml.Unmarshal(doc, &c); err != nil {
				return err
			}
			var kept []admissionv1.ValidatingWebhook
			for _, w := range c.Webhooks {
				if onJobSets(w.Rules) {
					url(&w.ClientConfig)
					kept = append(kept, w)
				}
			}
			obj = &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "jobset-" + c.Name}, Webhooks: kept}
		default:
			continue
		}
		if err := e.Client.Create(context.Background(), obj); err != nil {
			return fmt.Errorf("creating JobSet's %s: %w", meta.Kind, err)
		}
	}
}

// waitJobSetImmutability waits until the API server calls JobSet's webhooks
// (it reads webhook configurations with a delay): until changing the image
// of a suspended JobSet is refused, the rule those webhooks exist for here.
func (e *Env) waitJobSetImmutability() error {
	ctx := context.Background()
	js := &jobsetv1alpha2.JobSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "jobset-webhook-probe"},
		Spec: jobsetv1alpha2.JobSetSpec{Suspend: ptr.To(true), ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
			Name: "node", Replicas: 1,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "node", Image: "probe:v1"}},
			}}}},
		}}},
	}
	if err := e.Client.Create(ctx, js); err != nil {
		return fmt.Errorf("JobSet webhook probe: %w", err)
	}
	defer func() { _ = e.Client.Delete(ctx, js) }()
	deadline := time.Now().Add(Timeout)
	for image := 2; ; image++ {
		var cur jobsetv1alpha2.JobSet
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(js), &cur); err != nil {
			return err
		}
		cur.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("probe:v%d", image)
		err := e.Client.Update(ctx, &cur)
		if apierrors.IsInvalid(err) {
			return nil
		}
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("JobSet webhook probe: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("JobSet's webhooks not called within %s: a suspended JobSet's image can still change", Timeout)
		}
		time.Sleep(Interval)
	}
}

// freePort returns a local TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
