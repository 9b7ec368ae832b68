#!/usr/bin/env bash
# Copies what the Helm chart (manifests/charts/trainyard) takes verbatim from the
# rest of the repository into it, since Helm reads only files inside a chart:
#   - the CRDs that manifests/base/crds/kustomization.yaml lists, into crds/
#     (which Helm installs before it renders the templates; see the chart's
#     README for the CRD policy),
#   - the manager's generated ClusterRole (manifests/base/rbac/role.yaml),
#   - the generated webhook configurations (manifests/base/webhook/manifests.yaml),
#   - the runtime catalog (runtimes/*.yaml),
# the last three into files/.
# Run it after `make generate` or after changing runtimes/; test/manifests
# (TestChartFilesInSync) fails while the copies are stale.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
chart=$root/manifests/charts/trainyard
files=$chart/files
rm -rf "$chart/crds" "$files/rbac" "$files/webhook" "$files/runtimes"
mkdir -p "$chart/crds" "$files/rbac" "$files/webhook" "$files/runtimes"
sed -n 's/^- *\([^ #]*\.yaml\).*/\1/p' "$root/manifests/base/crds/kustomization.yaml" |
  while read -r f; do cp "$root/manifests/base/crds/$f" "$chart/crds/"; done
cp "$root/manifests/base/rbac/role.yaml" "$files/rbac/"
cp "$root/manifests/base/webhook/manifests.yaml" "$files/webhook/"
cp "$root"/runtimes/*.yaml "$files/runtimes/"
