{{/* Common names and labels. */}}
{{- define "cgs.fullname" -}}
{{- printf "%s-%s" .root.Release.Name .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "cgs.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: cgs-platform
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
cgs.io/environment: {{ .root.Values.environment }}
{{- end -}}

{{- define "cgs.selectorLabels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/*
Merges serviceDefaults with one service's values. Unlike mergeOverwrite, an explicit false or an
empty list in the service wins; nested maps (resources, autoscaling, pdb, egress) merge one level deep.
*/}}
{{- define "cgs.merge" -}}
{{- $out := deepCopy .base -}}
{{- range $k, $v := .override -}}
{{- $current := get $out $k -}}
{{- if and (kindIs "map" $v) (kindIs "map" $current) -}}
{{- $m := deepCopy $current -}}
{{- range $k2, $v2 := $v }}{{ $_ := set $m $k2 $v2 }}{{ end -}}
{{- $_ := set $out $k $m -}}
{{- else -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{- define "cgs.service" -}}
{{- include "cgs.merge" (dict "base" .root.Values.serviceDefaults "override" (get .root.Values.services .name)) -}}
{{- end -}}

{{/* ENV_STYLE name of a deployable: auth-proxy -> AUTH_PROXY. */}}
{{- define "cgs.envName" -}}
{{- . | upper | replace "-" "_" -}}
{{- end -}}

{{- define "cgs.image" -}}
{{- $img := .svc.image | default dict -}}
{{- $repo := $img.repository | default (printf "%s/%s" .root.Values.image.prefix .name) -}}
{{- $tag := $img.tag | default .root.Values.image.tag -}}
{{- if .root.Values.image.registry -}}
{{- printf "%s/%s:%s" .root.Values.image.registry $repo $tag -}}
{{- else -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}
{{- end -}}

{{- define "cgs.otelEndpoint" -}}
{{- printf "http://%s-otel-collector:4318" .Release.Name -}}
{{- end -}}

{{/* Secrets Store CSI volume for a deployable with Secrets Manager entries. */}}
{{- define "cgs.secretsVolume" -}}
- name: secrets-store
  csi:
    driver: secrets-store.csi.k8s.io
    readOnly: true
    volumeAttributes:
      secretProviderClass: {{ include "cgs.fullname" . }}
{{- end -}}
