{{/* Chart name, truncated to the 63-character DNS label limit. */}}
{{- define "goodput.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "goodput.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "goodput.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "goodput.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "goodput.selectorLabels" -}}
app.kubernetes.io/name: {{ include "goodput.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "goodput.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "goodput.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end }}

{{- define "goodput.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The goodput config file. Keys follow `goodput check`'s schema (docs/deploy.md). */}}
{{- define "goodput.config" -}}
listen: {{ printf "0.0.0.0:%d" (int .Values.service.port) | quote }}
scrape:
  {{- toYaml .Values.scrape | nindent 2 }}
{{- $labels := dict }}
{{- if and (eq .Values.mode "sidecar") .Values.podIdentity }}
{{- $_ := set $labels "pod" "${POD_NAME}" }}
{{- $_ := set $labels "namespace" "${POD_NAMESPACE}" }}
{{- $_ := set $labels "node" "${NODE_NAME}" }}
{{- end }}
{{- range $k, $v := .Values.externalLabels }}
{{- if kindIs "invalid" $v }}{{ $_ := unset $labels $k }}{{ else }}{{ $_ := set $labels $k $v }}{{ end }}
{{- end }}
{{- with $labels }}
external_labels:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if and .Values.tap.enabled (ne .Values.mode "sidecar") }}
{{- fail "tap.enabled needs mode=sidecar: the tap runs beside the engine, on loopback" }}
{{- end }}
{{- if .Values.targets }}
targets:
  {{- toYaml .Values.targets | nindent 2 }}
{{- else if eq .Values.mode "sidecar" }}
targets:
  - name: {{ include "goodput.fullname" . }}
    url: {{ printf "http://127.0.0.1:%d/metrics" (int .Values.engine.port) | quote }}
    engine: vllm
    model: {{ .Values.engine.model | quote }}
    {{- if .Values.tap.enabled }}
    tap: {listen: {{ printf "0.0.0.0:%d" (int .Values.tap.port) | quote }}, upstream: {{ printf "http://127.0.0.1:%d" (int .Values.engine.port) | quote }}}
    {{- end }}
{{- else if not .Values.discovery }}
{{- fail "mode=aggregator needs at least one entry in targets or discovery" }}
{{- end }}
{{- with .Values.discovery }}
discovery:
  {{- toYaml . | nindent 2 }}
{{- end }}
windows:
  {{- toYaml .Values.windows | nindent 2 }}
{{- with .Values.quantiles }}
quantiles:
  {{- toYaml . | nindent 2 }}
{{- end }}
slos:
  {{- toYaml .Values.slos | nindent 2 }}
{{- if .Values.state.enabled }}
state_dir: /var/lib/goodput
{{- with .Values.state.snapshotInterval }}
state_snapshot_interval: {{ . | quote }}
{{- end }}
{{- with .Values.state.maxSize }}
state_max_size: {{ . | quote }}
{{- end }}
{{- end }}
{{- with .Values.server }}
server:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.kvCache }}
kv_cache:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.alerting }}
alerting:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.gpu }}
gpu:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.cost }}
cost:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A restrictive securityContext for goodput: non-root, read-only, no capabilities. */}}
{{- define "goodput.securityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* True when the config discovers Kubernetes pods: the pod then needs a ServiceAccount
     that may list and watch pods. */}}
{{- define "goodput.podDiscovery" -}}
{{- range .Values.discovery }}{{ if hasKey . "kubernetes" }}true{{ end }}{{ end }}
{{- end }}
