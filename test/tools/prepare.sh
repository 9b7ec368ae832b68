#!/usr/bin/env bash
# Builds and installs what `make run` (or make test) needs, as one pipeline with one
# line per step (time so far, what is left, and about how long that takes on a
# cold build):
#   - the Debian packages (debian-packages.sh: the process node's pods; with
#     --container-packages also container-node-packages.sh), in the background from
#     the start: they are network and disk, the builds are CPU;
#   - Trainyard's binaries (make build: one go build of its five commands);
#   - the tools: for `prepare.sh run RUN_ARGS`, those of the cluster that
#     `trainyard-local run RUN_ARGS` starts, as `trainyard-local run -tools RUN_ARGS`
#     lists them (localcluster.Binaries, the one list of what a cluster runs): by
#     default etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
#     jobset-controller, no Kueue, kwok or kubectl, which the guide does not use; for
#     `prepare.sh tools TARGET...`, the targets given (make test-tools). build.sh
#     builds them into bin/k8s, all of a module's in one go build.
# Each step's wall and CPU seconds go to bin/k8s/build-times.tsv (with build.sh's),
# which test/tools/cold-start.sh reports.
#
# Usage: test/tools/prepare.sh run [RUN_ARGS...]                        (make run)
#        test/tools/prepare.sh tools [--container-packages] TARGET...   (make test-tools)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$repo/bin
mode=${1:?usage: prepare.sh run [RUN_ARGS...] | tools [--container-packages] TARGET...}; shift
container_packages=false
if [ "$mode" = tools ] && [ "${1:-}" = --container-packages ]; then container_packages=true; shift; fi
mkdir -p "$bin/k8s"
times_file=$bin/k8s/build-times.tsv
start=$(date +%s)

# What Trainyard's binaries take on a cold build (empty GOCACHE and module
# cache, downloads included) on an idle 2-core machine, built first: the
# estimate the first line gives (docs/performance.md, "Cold start").
TRAINYARD_COLD_S=340

mmss() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }
elapsed() { mmss $(( $(date +%s) - start )); }
# cpu_now: CPU seconds (user, system) of this shell's finished children so far,
# into $cpu (called as is, not in $(...): a subshell has no finished children).
cpu_now() {
  local f=$bin/k8s/.times.$BASHPID # this shell's, or the background one's
  times > "$f"; cpu=$(tail -1 "$f" | awk '{for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); printf "%.2f ", a[1] * 60 + a[2] }}'); rm -f "$f"
}
record() { # record LABEL T0 C0: LABEL's wall and CPU seconds since T0 (date +%s.%N) and C0 (cpu_now)
  cpu_now
  awk -v l="$1" -v t0="$2" -v t1="$(date +%s.%N)" -v c0="$3" -v c1="$cpu" 'BEGIN {
    split(c0, a, " "); split(c1, b, " ")
    printf "%s\t%.1f\t%.1f\t%.1f\n", l, t1 - t0, b[1] - a[1], b[2] - a[2] }' >> "$times_file"
}
line() { printf '  [%s] %-24s %s  %s\n' "$1" "$2" "$(elapsed)" "$3" >&2; }

# The packages, in the background (one apt at a time: they share dpkg's lock). They
# finish whatever happens to the builds: an apt-get killed halfway leaves dpkg to repair.
deb_log=$bin/debian-packages.log
(
  t0=$(date +%s.%N); cpu_now; c0=$cpu
  rc=0; "$repo/pkg/localcluster/packages/debian-packages.sh" > "$deb_log" 2>&1 || rc=$?
  if [ $rc -eq 0 ] && $container_packages; then "$repo/pkg/localcluster/packages/container-node-packages.sh" >> "$deb_log" 2>&1 || rc=$?; fi
  record "Debian packages" "$t0" "$c0"
  exit $rc
) &
deb=$!
finish_debian() {
  local rc=0
  if kill -0 "$deb" 2>/dev/null; then echo "  waiting for the Debian packages ($deb_log) ..." >&2; fi
  wait "$deb" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "installing the Debian packages failed (exit $rc): $deb_log" >&2; cat "$deb_log" >&2
    return $rc
  fi
  if grep -q '^== installing' "$deb_log"; then
    line 3/3 "Debian packages" "$(sed -n 's/^== installing Debian packages[^:]*: //p' "$deb_log" | tr '\n' ' ')"
  fi
}
trap 'finish_debian || true' EXIT

# Every cluster runs etcd and kube-apiserver: their modules (which hold run's other
# tools too) download in the background while Trainyard compiles.
"$here/build.sh" --download etcd kube-apiserver > "$bin/k8s/download.log" 2>&1 &
dl=$!

t0=$(date +%s.%N); cpu_now; c0=$cpu
if [ "$mode" = run ]; then
  echo "== make run: Trainyard's binaries (about $(mmss $TRAINYARD_COLD_S) on a cold build), then the tools its cluster runs; the Debian packages meanwhile ($deb_log)" >&2
fi
"${MAKE:-make}" -C "$repo" --no-print-directory -s build
record "Trainyard binaries" "$t0" "$c0"

if [ "$mode" = run ]; then
  mapfile -t tools < <("$bin/trainyard-local" run -tools "$@")
else
  tools=("$@")
fi
estimate=$("$here/build.sh" --estimate "$bin/k8s" "${tools[@]}")
line 1/3 "Trainyard binaries" "left: the tools${estimate:+ (about $estimate on a cold build)}, Debian packages (in the background)"

"$here/build.sh" "$bin/k8s" "${tools[@]}"
wait "$dl" || true # build.sh downloaded whatever it still lacked
line 2/3 "tools" "${tools[*]}"

trap - EXIT
finish_debian
