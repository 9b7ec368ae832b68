{{/*
The manager's namespace: namespace.name, else the release namespace.
*/}}
{{- define "trainyard.namespace" -}}
{{- default .Release.Namespace .Values.namespace.name -}}
{{- end -}}

{{/*
Labels that select the manager's pods. They are the Deployment's selector,
which cannot change, and equal those of manifests/base.
*/}}
{{- define "trainyard.selectorLabels" -}}
app.kubernetes.io/name: trainyard
app.kubernetes.io/component: manager
{{- end -}}

{{/*
Labels of every object of the chart.
*/}}
{{- define "trainyard.labels" -}}
{{ include "trainyard.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/*
The manager image: repository@digest, else repository:tag (tag defaults to the
chart's appVersion).
*/}}
{{- define "trainyard.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The names the manager relies on: its defaults for --webhook-service-name and
--webhook-secret-name, and the webhook configurations it injects its CA bundle
into (cmd/trainyard-manager/webhooks.go).
*/}}
{{- define "trainyard.webhookService" -}}trainyard-webhook{{- end -}}
{{- define "trainyard.webhookSecret" -}}trainyard-webhook-cert{{- end -}}
{{- define "trainyard.metricsService" -}}trainyard-manager-metrics{{- end -}}
{{- /* Where the metrics certificate Secret (metrics.certSecret) is mounted. */ -}}
{{- define "trainyard.metricsCertDir" -}}/tmp/k8s-metrics-server/metrics-certs{{- end -}}
{{- define "trainyard.mutatingWebhook" -}}trainyard-mutating-webhook-configuration{{- end -}}
{{- define "trainyard.validatingWebhook" -}}trainyard-validating-webhook-configuration{{- end -}}

{{/*
Whether the manager creates and rotates the webhook certificate itself
(--cert-management=internal), the default, rather than cert-manager.
*/}}
{{- define "trainyard.internalCerts" -}}
{{- if not .Values.webhook.certManager.enabled }}true{{ end -}}
{{- end -}}

{{/*
With cert-manager and no issuerRef of the user's, the chart's CA: the
self-signed Issuer, the CA Certificate and Secret trainyard-webhook-ca, and the
CA Issuer that signs the serving certificate.
*/}}
{{- define "trainyard.selfSignedIssuer" -}}trainyard-selfsigned{{- end -}}
{{- define "trainyard.webhookCA" -}}trainyard-webhook-ca{{- end -}}
{{- define "trainyard.caIssuer" -}}trainyard-ca{{- end -}}

{{/*
The Certificate whose CA cert-manager's CA injector puts into the webhook
configurations: the chart's CA, so that renewing the serving certificate
changes no trust anchor; with an issuerRef of the user's, the serving
certificate (its Secret's ca.crt, the issuer's CA).
*/}}
{{- define "trainyard.webhookCASource" -}}
{{- if .Values.webhook.certManager.issuerRef -}}
{{- include "trainyard.webhookSecret" . -}}
{{- else -}}
{{- include "trainyard.webhookCA" . -}}
{{- end -}}
{{- end -}}

{{/*
Checks of value combinations that the schema cannot express.
*/}}
{{- define "trainyard.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "replicaCount > 1 needs leaderElection.enabled: replicas without leader election would all reconcile the same TrainJobs" -}}
{{- end -}}
{{- if has (int .Values.metrics.port) (list 8081 9443) -}}
{{- fail "metrics.port must differ from the manager's health (8081) and webhook (9443) ports" -}}
{{- end -}}
{{- if and .Values.metrics.certSecret (not .Values.metrics.secure) -}}
{{- fail "metrics.certSecret needs metrics.secure: plain HTTP uses no certificate" -}}
{{- end -}}
{{- if and (not .Values.namespace.name) (not .Release.Namespace) -}}
{{- fail "set namespace.name or install with --namespace" -}}
{{- end -}}
{{- if and .Values.namespace.create (eq (include "trainyard.namespace" .) .Release.Namespace) -}}
{{- fail (printf "namespace.create needs a namespace.name other than the release namespace %s: Helm keeps the release there, so it must exist before the chart's objects are created; create it with `helm install --create-namespace` instead" .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/*
On upgrade, refuses to render when a Namespace that this release created (with
namespace.create) would be deleted: with namespace.create now false, or with
another namespace.name. That is what upgrading a release of chart 0.1.0, whose
defaults created trainyard-system, with the new defaults would do, and it would
delete everything in that namespace. lookup finds nothing in `helm template`
and client-side dry runs, so the check runs only against a cluster.
*/}}
{{- define "trainyard.checkOwnedNamespaces" -}}
{{- if .Release.IsUpgrade -}}
{{- $keep := "" -}}
{{- if .Values.namespace.create -}}
{{- $keep = include "trainyard.namespace" . -}}
{{- end -}}
{{- range $ns := (lookup "v1" "Namespace" "" "").items | default list -}}
{{- $ann := default dict $ns.metadata.annotations -}}
{{- if and (eq (get $ann "meta.helm.sh/release-name") $.Release.Name) (eq (get $ann "meta.helm.sh/release-namespace") $.Release.Namespace) (ne $ns.metadata.name $keep) (ne (get $ann "helm.sh/resource-policy") "keep") -}}
{{- fail (printf "release %s created Namespace %s (namespace.create), which this upgrade would delete with everything in it: upgrade with --set namespace.create=true,namespace.name=%s to keep the manager there (docs/install.md, \"Upgrade\")" $.Release.Name $ns.metadata.name $ns.metadata.name) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The label that exempts a runtime from the runtime validating webhooks, and the
objectSelector of those webhooks.
*/}}
{{- define "trainyard.webhookValidationLabel" -}}trainer.kubeflow.org/webhook-validation{{- end -}}
{{- define "trainyard.runtimeWebhookObjectSelector" -}}
matchExpressions:
- key: {{ include "trainyard.webhookValidationLabel" . }}
  operator: NotIn
  values:
  - disabled
{{- end -}}
