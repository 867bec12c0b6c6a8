{{/* Names. Kubernetes names are limited to 63 characters. */}}
{{- define "kube-headroom.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kube-headroom.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kube-headroom.reconcilerName" -}}
{{- printf "%s-reconciler" (include "kube-headroom.fullname" .) }}
{{- end }}

{{/* Webhook pods: webhook.replicas, else the shared replicas value. */}}
{{- define "kube-headroom.webhookReplicas" -}}
{{- if kindIs "invalid" .Values.webhook.replicas }}{{ .Values.replicas }}{{ else }}{{ .Values.webhook.replicas }}{{ end }}
{{- end }}

{{- define "kube-headroom.webhookName" -}}
{{- printf "%s-webhook" (include "kube-headroom.fullname" .) }}
{{- end }}

{{- define "kube-headroom.reconcilerMetricsService" -}}
{{- printf "%s-reconciler-metrics" (include "kube-headroom.fullname" .) }}
{{- end }}

{{- define "kube-headroom.webhookMetricsService" -}}
{{- printf "%s-webhook-metrics" (include "kube-headroom.fullname" .) }}
{{- end }}

{{/* Secret names the runbook fixes. */}}
{{- define "kube-headroom.metricsCertSecret" -}}
metrics-server-cert
{{- end }}

{{- define "kube-headroom.webhookCertSecret" -}}
{{- if .Values.certmanager.enable }}webhook-server-cert{{ else }}{{ .Values.webhook.certSecretName }}{{ end }}
{{- end }}

{{- define "kube-headroom.webhookCertificate" -}}
{{- printf "%s-webhook-cert" (include "kube-headroom.fullname" .) }}
{{- end }}

{{/* Labels. */}}
{{- define "kube-headroom.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-headroom.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kube-headroom.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kube-headroom.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one process; call with (dict "root" $ "component" "webhook"). */}}
{{- define "kube-headroom.componentSelectorLabels" -}}
{{ include "kube-headroom.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "kube-headroom.componentLabels" -}}
{{ include "kube-headroom.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "kube-headroom.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Combinations that render but cannot work fail here, naming the values to set.
Included from every Deployment so no rendering path skips it.
*/}}
{{- define "kube-headroom.validate" -}}
{{- if and .Values.metrics.certManagerTLS (not .Values.certmanager.enable) }}
{{- fail "metrics.certManagerTLS=true needs cert-manager to issue the metrics-server-cert Secret: set certmanager.enable=true, or set metrics.certManagerTLS=false" }}
{{- end }}
{{- if and .Values.webhook.enable (not .Values.certmanager.enable) (or (not .Values.webhook.certSecretName) (not .Values.webhook.caBundle)) }}
{{- fail (printf "webhook.enable=true with certmanager.enable=false needs a serving certificate you provide: set webhook.certSecretName (a kubernetes.io/tls Secret in %s whose certificate has the DNS name %s.%s.svc) and webhook.caBundle (base64 PEM of the CA that signed it); or set certmanager.enable=true; or set webhook.enable=false" .Release.Namespace (include "kube-headroom.webhookName" .) .Release.Namespace) }}
{{- end }}
{{- end }}

{{/* Restricted Pod Security, pod level. */}}
{{- define "kube-headroom.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Restricted Pod Security, container level; the image runs with a read-only root. */}}
{{- define "kube-headroom.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "kube-headroom.metricsCertDir" -}}
/tmp/k8s-metrics-server/metrics-certs
{{- end }}

{{/* Flags both processes share: metrics, health probes, logs. */}}
{{- define "kube-headroom.commonArgs" -}}
- --metrics-bind-address=:8443
- --metrics-secure=true
- --health-probe-bind-address=:8081
- --log-format=json
{{- if .Values.metrics.certManagerTLS }}
- --metrics-cert-path={{ include "kube-headroom.metricsCertDir" . }}
{{- end }}
{{- end }}

{{- define "kube-headroom.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}

{{- define "kube-headroom.commonPorts" -}}
- name: metrics
  containerPort: 8443
  protocol: TCP
- name: health
  containerPort: 8081
  protocol: TCP
{{- end }}

{{- define "kube-headroom.probes" -}}
{{- /* Liveness and readiness start once the process listens: a start slowed by a busy node
(30 s and more for Python's imports) is given two minutes, not killed by liveness and
restarted mid-rollout. */}}
startupProbe:
  httpGet:
    path: /healthz
    port: health
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet:
    path: /healthz
    port: health
  periodSeconds: 10
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /readyz
    port: health
  periodSeconds: 5
  failureThreshold: 3
{{- end }}

{{/* Mounts both processes share: a writable /tmp and, with certManagerTLS, the metrics cert. */}}
{{- define "kube-headroom.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.metrics.certManagerTLS }}
- name: metrics-certs
  mountPath: {{ include "kube-headroom.metricsCertDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{- define "kube-headroom.commonVolumes" -}}
- name: tmp
  emptyDir:
    medium: Memory
    sizeLimit: 16Mi
{{- if .Values.metrics.certManagerTLS }}
- name: metrics-certs
  secret:
    secretName: {{ include "kube-headroom.metricsCertSecret" . }}
{{- end }}
{{- end }}

{{/* Spread replicas over nodes; call with (dict "root" $ "component" "webhook"). */}}
{{- define "kube-headroom.topologySpread" -}}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- include "kube-headroom.componentSelectorLabels" . | nindent 6 }}
{{- end }}

{{/*
Selectors default in the template, not in values.yaml: Helm deep-merges maps, so a
default there would be merged into, not replaced by, the selector an operator sets.
*/}}
{{- define "kube-headroom.enrolmentSelector" -}}
{{- $selector := .Values.webhook.namespaceSelector }}
{{- if kindIs "invalid" $selector }}
{{- $selector = dict "matchLabels" (dict "kube-headroom.dev/mode" "managed") }}
{{- end }}
{{- toYaml $selector }}
{{- end }}

{{- define "kube-headroom.metricsNamespaceSelector" -}}
{{- $selector := .Values.networkPolicy.metricsNamespaceSelector }}
{{- if kindIs "invalid" $selector }}
{{- $selector = dict "matchLabels" (dict "metrics" "enabled") }}
{{- end }}
{{- toYaml $selector }}
{{- end }}

{{/* The enrolment selector plus the exclusion of the release namespace. */}}
{{- define "kube-headroom.webhookNamespaceSelector" -}}
{{- $selector := include "kube-headroom.enrolmentSelector" . | fromYaml }}
{{- $own := dict "key" "kubernetes.io/metadata.name" "operator" "NotIn" "values" (list .Release.Namespace) }}
{{- $_ := set $selector "matchExpressions" (append (default (list) $selector.matchExpressions) $own) }}
{{- toYaml $selector }}
{{- end }}

{{- define "kube-headroom.notOwnNamespace" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: [{{ .Release.Namespace | quote }}]
{{- end }}
