package main

// notesTemplate is templates/NOTES.txt, which helm install and upgrade print: what the
// release installed, the cluster admin's consents (given or how to give them, as
// docs/INSTALL.md says), and where the documentation is. Missing values (a release from an
// older chart, upgraded with --reuse-values) read as their defaults.
const notesTemplate = `{{- $rbac := dig "create" true (.Values.rbac | default dict) }}
{{- $aggregate := dig "aggregateToBuiltinRoles" true (.Values.rbac | default dict) }}
{{- $sas := (.Values.copyrator | default dict).platformServiceAccounts }}
{{- $grants := (.Values.registryMirror | default dict).hostGrants }}
Quartet {{ .Chart.AppVersion }} is installed as release {{ .Release.Name }} in namespace {{ .Release.Namespace }}:

- the manager, Deployment quartet-controller-manager ({{ .Values.replicaCount }} replica(s), image
  {{ .Values.image.repository }}:{{ .Values.image.tag }}), running as ServiceAccount {{ include "quartet.serviceAccountName" . }}
  {{- if not (dig "create" true (.Values.serviceAccount | default dict)) }} (not created by the chart){{ end }},
  acting in {{ if .Values.watchNamespace }}the namespaces {{ .Values.watchNamespace }}{{ else }}every namespace{{ end }};
{{- if .Values.crds.install }}
- the CRDs of ChaosAgent, CopyratorRule, ExchangeRate, RegistryMirror and RegistryHostGrant
  {{- if .Values.crds.keep }} (kept when the release is uninstalled){{ end }};
{{- else }}
- no CRDs (crds.install=false): install them yourself (config/crd);
{{- end }}
{{- if $rbac }}
- its RBAC: the manager's roles, the CRs' editor and viewer roles
  {{- if $aggregate }} (aggregated into admin, edit and view){{ else }} (not aggregated: bind them yourself){{ end }},
  quartet-copyrator-target and quartet-metrics-reader.
{{- else }}
- no RBAC (rbac.create=false): the manager needs its ClusterRole, Role and bindings (config/rbac)
  for ServiceAccount {{ .Release.Namespace }}/{{ include "quartet.serviceAccountName" . }} before it can work.
{{- end }}

  kubectl get deployment quartet-controller-manager -n {{ .Release.Namespace }}

A cluster admin's consents (what reaches beyond a CR's own namespace):

- Copies into every namespace: a CopyratorRule copies only where its ServiceAccount may create
  the kind.
{{- if $sas }}
  {{- $given := list }}
  {{- range $sas }}{{ $given = append $given (printf "%s/%s" .namespace (.name | default "copyrator")) }}{{ end }}
  Given to the ServiceAccounts {{ join ", " $given }}.
{{- else }} None given yet. Either add copyrator.platformServiceAccounts, e.g.
  [{namespace: platform}], in a helm upgrade, or bind the role yourself:
  kubectl create clusterrolebinding copyrator-platform --clusterrole=quartet-copyrator-target --serviceaccount=platform:copyrator
{{- end }}
- A RegistryMirror on the nodes (containerd's hosts.toml and node agents): a RegistryHostGrant
  per registry host.
{{- if $grants }}
  {{- $given := list }}
  {{- range $grants }}{{ $given = append $given (printf "%s to %s/%s" .host (dig "mirror" "namespace" "" .) (dig "mirror" "name" "" .)) }}{{ end }}
  Granted: {{ join ", " $given }}.
{{- else }} None given yet. Add registryMirror.hostGrants, e.g.
  [{host: docker.io, mirror: {namespace: registry-mirrors, name: docker-hub}}], in a later
  helm upgrade (not the one that first brings the CRD) with --reset-then-reuse-values, or
  kubectl apply a RegistryHostGrant (config/samples/mirrors_v1alpha1_registryhostgrant.yaml).
{{- end }}

Try the samples (config/samples), and read more:
  https://github.com/quartet-operator/quartet/blob/main/README.md
  https://github.com/quartet-operator/quartet/blob/main/docs/INSTALL.md   (consents, upgrades, removal)
  https://github.com/quartet-operator/quartet/blob/main/docs/SECURITY.md  (permissions, pod security)
`
