{{/* The release's base name. */}}
{{- define "tenantry.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tenantry.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tenantry.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* "true" when `tenantry serve` runs on the embedded database: no PostgreSQL Secret is named. */}}
{{- define "tenantry.embedded" -}}
{{- if not .Values.serve.database.secretName -}}true{{- end -}}
{{- end -}}

{{/* The Secrets holding the operator token and the secret key: the ones named, else the chart's own. */}}
{{- define "tenantry.operatorTokenSecret" -}}
{{- .Values.serve.operatorToken.secretName | default (printf "%s-operator-token" (include "tenantry.fullname" .)) -}}
{{- end -}}

{{- define "tenantry.secretKeySecret" -}}
{{- .Values.serve.secretKey.secretName | default (printf "%s-secret-key" (include "tenantry.fullname" .)) -}}
{{- end -}}

{{/*
A Secret the chart generates once: on later renders (`helm upgrade`, a reinstall after an uninstall kept it)
the value already in the cluster is read back with `lookup`, so the token and the key never change under
the data they sealed. `helm template` and client-side dry runs see no cluster and show a fresh value.
Arguments: the root context, the Secret's name, its key, a freshly generated value.
*/}}
{{- define "tenantry.generatedSecret" -}}
{{- $root := index . 0 -}}{{- $name := index . 1 -}}{{- $key := index . 2 -}}{{- $fresh := index . 3 -}}
{{- $existing := lookup "v1" "Secret" $root.Release.Namespace $name -}}
{{- $value := $fresh | b64enc -}}
{{- if and $existing $existing.data (hasKey $existing.data $key) -}}{{- $value = index $existing.data $key -}}{{- end -}}
apiVersion: v1
kind: Secret
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "tenantry.labels" $root | nindent 4 }}
    app.kubernetes.io/component: serve
  annotations:
    # Deleting it would leave the sealed data unreadable (the key) and the operator's tooling locked out.
    helm.sh/resource-policy: keep
type: Opaque
data:
  {{ $key }}: {{ $value }}
{{- end -}}

{{/* Pod and container security settings shared by both Deployments. */}}
{{- define "tenantry.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "tenantry.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The probe host an endpoint uses: its health.host, else (edge gateway) the console host. */}}
{{- define "tenantry.healthHost" -}}
{{- $cfg := index . 0 -}}{{- $root := index . 1 -}}{{- $key := index . 2 -}}
{{- if $cfg.backend.health.host -}}
{{- $cfg.backend.health.host -}}
{{- else if eq $key "edgeGateway" -}}
{{- $root.Values.platform.hostnames.console -}}
{{- end -}}
{{- end -}}

{{/* Fails rendering with a message an operator can act on when an enabled endpoint is incomplete. */}}
{{- define "tenantry.validateEndpoint" -}}
{{- $cfg := index . 0 -}}{{- $root := index . 1 -}}{{- $key := index . 2 -}}
{{- $path := printf "platformEndpoints.%s" $key -}}
{{- if not $cfg.vip -}}
{{- fail (printf "%s.enabled is true but %s.vip is empty: pick a free address in the external subnet, add it to EXT_NET_EXCLUDE_IPS and to both allowlists, then set %s.vip" $path $path $path) -}}
{{- end -}}
{{- if not (regexMatch "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$" ($cfg.vip | toString)) -}}
{{- fail (printf "%s.vip must be one IPv4 address (no prefix length), got %q" $path ($cfg.vip | toString)) -}}
{{- end -}}
{{- if not $cfg.loadBalancerClass -}}
{{- fail (printf "%s.loadBalancerClass is empty: set it to the MetalLB controller's --lb-class" $path) -}}
{{- end -}}
{{- if ne $cfg.backend.mode "node-control-plane" -}}
{{- fail (printf "%s.backend.mode must be node-control-plane, got %q" $path $cfg.backend.mode) -}}
{{- end -}}
{{- if not $cfg.backend.nodeSelector -}}
{{- fail (printf "%s.backend.nodeSelector must name at least one label" $path) -}}
{{- end -}}
{{- $host := include "tenantry.healthHost" (list $cfg $root $key) -}}
{{- if eq $key "edgeGateway" -}}
{{- if not $host -}}
{{- fail (printf "%s.backend.health.host is required: the hostname of a TLS-terminating HTTPRoute on the gateway (for example the console host); set it or platform.hostnames.console" $path) -}}
{{- end -}}
{{- end -}}
{{- if and $host $root.Values.platform.hostnames.kubeAPI (eq (lower $host) (lower $root.Values.platform.hostnames.kubeAPI)) -}}
{{- fail (printf "%s.backend.health.host is %q, the cluster API hostname: that is a TLS pass-through route, the gateway resets the probe's handshake and every node would leave the slice; use a TLS-terminating route such as the console host" $path $host) -}}
{{- end -}}
{{- end -}}

{{/*
A `health:` block directly under an endpoint is ignored by nothing else: the probe would silently keep its
defaults. The probe settings are the backend's (`backend.health`, where Kube-DC's chart has them too).
*/}}
{{- define "tenantry.misplacedHealth" -}}
{{- $cfg := index . 0 -}}{{- $key := index . 1 -}}
{{- if hasKey $cfg "health" -}}
{{- fail (printf "platformEndpoints.%s.health is not a setting: the probe settings go under platformEndpoints.%s.backend.health (scheme, path, port, host, ...)" $key $key) -}}
{{- end -}}
{{- end -}}

{{/* The enabled endpoints' keys, comma-separated ("" when none). */}}
{{- define "tenantry.enabledEndpoints" -}}
{{- $keys := list -}}
{{- range $key := list "kubeAPI" "edgeGateway" -}}
{{- if (index $.Values.platformEndpoints $key).enabled -}}{{- $keys = append $keys $key -}}{{- end -}}
{{- end -}}
{{- join "," $keys -}}
{{- end -}}

{{/* The namespaces of the enabled endpoints, comma-separated and without repeats. */}}
{{- define "tenantry.endpointNamespaces" -}}
{{- $namespaces := list -}}
{{- range $key := list "kubeAPI" "edgeGateway" -}}
{{- $cfg := index $.Values.platformEndpoints $key -}}
{{- if $cfg.enabled -}}{{- $namespaces = append $namespaces $cfg.namespace -}}{{- end -}}
{{- end -}}
{{- join "," ($namespaces | uniq) -}}
{{- end -}}

{{/* Whether the serve ServiceAccount talks to the Kubernetes API (the kubernetes platform driver, or extra rules). */}}
{{- define "tenantry.usesKubeAPI" -}}
{{- or (eq .Values.serve.config.platform "kubernetes") (gt (len .Values.platformDriver.kubernetes.rbac.clusterRules) 0) -}}
{{- end -}}

{{/*
The kubernetes platform driver's cluster-wide rules: exactly the calls in
packages/server/src/platform/kubernetes (kube.ts lists the kinds). No secrets, no pods, no wildcard.
*/}}
{{- define "tenantry.kubeDcServiceAccount" -}}
{{- default (printf "%s-plan-writer" (include "tenantry.fullname" .)) .Values.platformDriver.kubernetes.kubeDc.serviceAccount.name -}}
{{- end -}}

{{- define "tenantry.platformDriverRules" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, create, delete]
- apiGroups: [""]
  resources: [resourcequotas]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [limitranges]
  verbs: [list]
- apiGroups: [kube-dc.com]
  resources: [organizations]
  verbs: [get, create, delete]
- apiGroups: [kube-dc.com]
  resources: [projects]
  verbs: [get, list, create, delete]
- apiGroups: [kube-dc.com]
  resources: [partners]
  verbs: [get, list, watch]
- apiGroups: [kube-dc.com]
  resources: [partners/status]
  verbs: [get, patch]
- apiGroups: [hnc.x-k8s.io]
  resources: [hierarchicalresourcequotas]
  verbs: [get, create, patch]
- apiGroups: [kubevirt.io]
  resources: [virtualmachines]
  verbs: [get, list, create, patch, delete]
- apiGroups: [cdi.kubevirt.io]
  resources: [datavolumes]
  verbs: [list, create]
- apiGroups: [db.kube-dc.com]
  resources: [kdcdatabases]
  verbs: [list, patch]
- apiGroups: [postgresql.cnpg.io]
  resources: [clusters]
  verbs: [get, patch]
{{- end -}}
