#!/usr/bin/env bash
# Builds the control-plane binaries that tests run, from Go modules, into an output
# directory (default bin/k8s). Each binary is rebuilt only when its tool module's
# go.mod/go.sum changed since the last build (a stamp file beside the binary), so a
# warm run costs nothing.
#
# Usage: test/tools/build.sh OUTDIR [TARGET ...]
# Targets: etcd kube-apiserver kube-controller-manager kube-scheduler kubectl
#          kwok jobset-controller kueue-controller s3-server
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?output directory}; shift
mkdir -p "$out"; out=$(cd "$out" && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(etcd kube-apiserver)
export CGO_ENABLED=0

stamp_of() { cat "$here/$1/go.mod" "$here/$1/go.sum" | sha256sum | cut -c1-16; }

fresh() { # fresh BIN MODULE_DIR -> 0 when BIN exists and was built from the current go.mod/go.sum
  [ -x "$out/$1" ] && [ "$(cat "$out/.$1.stamp" 2>/dev/null)" = "$(stamp_of "$2")" ]
}

kube_ldflags() {
  local kv maj min ld="-s -w"
  kv=$(cd "$here/kube" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  maj=$(echo "${kv#v}" | cut -d. -f1); min=$(echo "${kv#v}" | cut -d. -f2)
  # Without these the binaries report v0.0.0-master and clients that parse the
  # server version (kubectl skew checks, JobSet, Kueue) misbehave.
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$kv -X $p.gitMajor=$maj -X $p.gitMinor=$min -X $p.gitTreeState=clean -X $p.buildDate=2000-01-01T00:00:00Z"
  done
  echo "$ld"
}

module_version() { (cd "$here/$1" && go list -m -f '{{.Version}}' "$2"); }

for t in "${targets[@]}"; do
  case "$t" in
    etcd) mod=etcd; pkg=. ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl) mod=kube; pkg=k8s.io/kubernetes/cmd/$t ;;
    kwok) mod=kwok; pkg=sigs.k8s.io/kwok/cmd/kwok ;;
    jobset-controller) mod=jobset; pkg=sigs.k8s.io/jobset
      modpath=sigs.k8s.io/jobset; pkg_version_var=sigs.k8s.io/jobset/pkg/version.GitVersion ;;
    kueue-controller) mod=kueue; pkg=sigs.k8s.io/kueue/cmd/kueue
      modpath=sigs.k8s.io/kueue; pkg_version_var=sigs.k8s.io/kueue/pkg/version.GitVersion ;;
    s3-server) mod=s3server; pkg=. ;;
    *) echo "build.sh: unknown target $t" >&2; exit 2 ;;
  esac
  if fresh "$t" "$mod"; then continue; fi
  echo "building $t (from test/tools/$mod) ..." >&2
  start=$(date +%s)
  ld="-s -w"
  case "$mod" in
    kube) ld=$(kube_ldflags) ;;
    # The controllers report (and JobSet/Kueue log) their version from these variables.
    jobset|kueue) ld="$ld -X $pkg_version_var=$(module_version "$mod" "$modpath")" ;;
  esac
  (cd "$here/$mod" && go build -trimpath -ldflags="$ld" -o "$out/$t.tmp" "$pkg")
  mv "$out/$t.tmp" "$out/$t"
  stamp_of "$mod" > "$out/.$t.stamp"
  echo "built $t in $(( $(date +%s) - start ))s" >&2
done
