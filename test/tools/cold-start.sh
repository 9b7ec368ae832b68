#!/usr/bin/env bash
# Measures a cold `make run` (or `make test`) as a newcomer's first one on this
# machine: a fresh clone of the repository (so no bin/), an empty module cache and
# an empty build cache, and, with --remove-debian-packages, none of the process
# node's Debian packages. The caches are scratch directories handed to the go
# command through GOMODCACHE and GOCACHE: the machine's own caches are neither read
# nor touched (other builds may be using them).
#
# It prints, and writes to DIR/result.md and DIR/steps.tsv, the wall time and the
# CPU seconds (user + system, which another load on the machine barely changes)
# of the whole command and of each step (the clone's bin/k8s/build-times.tsv, which
# test/tools/build.sh and run-deps.sh fill), with the machine, the Go version and
# the load average before, during (mean of samples every 10 s) and after. Wall
# times are only comparable on an idle machine; say what else ran.
#
# Usage: test/tools/cold-start.sh [--test [--build-only]] [--ref REV]
#            [--remove-debian-packages] [--lock FILE] [--dir DIR] [--keep] [-- MAKEVAR=value ...]
#   --test        make test instead of make run (about 45 minutes cold on 2 cores)
#   --build-only  with --test: only what make test builds: each prerequisite of the
#                 test target (timed one by one) and every package's test binary
#                 (go test -exec /bin/true: compiled and linked as make test does, run
#                 by /bin/true), not the tests
#   --ref REV     the commit to clone (default HEAD; e.g. an older one to compare)
#   --remove-debian-packages
#                 apt-get remove the packages of pkg/localcluster/packages/debian-packages.sh first
#                 (python3-torch & co.: what pods of the process node use), so that
#                 the command installs them as on a fresh machine. This changes the
#                 machine: only where nothing else needs them meanwhile.
#   --lock FILE   make run: build (the run target's prerequisites) without the lock,
#                 then hold FILE (flock) for the rest, which starts a cluster; the two
#                 phases are reported and summed. make test: hold it throughout.
#   --dir DIR     scratch directory (default: a new one under /var/tmp); it needs
#                 about 6 GB for make run, more for make test
#   --keep        keep the scratch directory (the clone, its bin/ and the caches)
#   MAKEVAR=value passed to make (e.g. TRAINING_IMAGES=false)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
target=run build_only=false ref=HEAD remove_deb=false lock= dir= keep=false
while [ $# -gt 0 ]; do
  case "$1" in
    --test) target=test ;;
    --build-only) build_only=true ;;
    --ref) ref=$2; shift ;;
    --remove-debian-packages) remove_deb=true ;;
    --lock) lock=$2; shift ;;
    --dir) dir=$2; shift ;;
    --keep) keep=true ;;
    --) shift; break ;;
    *) echo "cold-start.sh: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
  shift
done
makevars=("$@")
if $build_only && [ $target != test ]; then echo "--build-only goes with --test" >&2; exit 2; fi

[ -n "$dir" ] || dir=$(mktemp -d /var/tmp/trainyard-cold.XXXXXX)
mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
[ -z "$(ls -A "$dir")" ] || { echo "cold-start.sh: $dir is not empty" >&2; exit 2; }
src=$dir/src results=$dir/results
mkdir -p "$dir/gomodcache" "$dir/gocache" "$results"
export GOMODCACHE=$dir/gomodcache GOCACHE=$dir/gocache
# The module cache's files are read-only; chmod first so that rm can remove them.
cleanup() {
  [ -z "${sampler:-}" ] || kill "$sampler" 2>/dev/null || true
  if ! $keep; then chmod -R u+w "$dir/gomodcache" 2>/dev/null || true; rm -rf "$dir/gomodcache" "$dir/gocache" "$src"; fi
}
trap cleanup EXIT

# Committed work only: the clone has what REV has, nothing uncommitted.
rev=$(git -C "$repo" rev-parse "$ref^{commit}")
git clone --quiet --no-hardlinks --no-checkout "$repo" "$src"
git -C "$src" checkout --quiet "$rev"
commit=$(git -C "$src" rev-parse --short HEAD)

if $remove_deb; then
  # The list is the clone's own (what its make run installs).
  mapfile -t pkgs < <(sed -n 's/^PACKAGES=(\(.*\))/\1/p' "$src/pkg/localcluster/packages/debian-packages.sh" | tr ' ' '\n')
  echo "== removing the Debian packages: ${pkgs[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "${pkgs[@]}" > "$results/apt-remove.log" 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get autoremove -y -qq >> "$results/apt-remove.log" 2>&1
fi

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(loadavg)
: > "$results/load.txt"
( while sleep 10; do cut -d' ' -f1 /proc/loadavg >> "$results/load.txt"; done ) &
sampler=$!

# timed LABEL CMD...: wall and CPU seconds of CMD (its children's rusage, as
# /usr/bin/time would report) into steps.tsv; the output goes to LABEL's log and,
# for make's own lines, the terminal.
# cpu_now: CPU seconds (user, system) of this shell's finished children so far,
# into $cpu (called as is, not in $(...): a subshell has no finished children).
cpu_now() { times > "$results/.times"; cpu=$(tail -1 "$results/.times" | awk '{for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); printf "%.2f ", a[1] * 60 + a[2] }}'); }
timed() {
  local label=$1 t0 c0 cpu rc=0; shift
  echo "== $label: $*"
  t0=$(date +%s.%N); cpu_now; c0=$cpu
  (cd "$src" && "$@") > >(tee -a "$results/output.log") 2>&1 || rc=$?
  cpu_now
  local wait=0
  if [ -f "$results/lock-wait" ]; then wait=$(cat "$results/lock-wait"); rm "$results/lock-wait"; label="$label (after $wait s waiting for the lock)"; fi
  awk -v l="$label" -v t0="$t0" -v t1="$(date +%s.%N)" -v w="$wait" -v c0="$c0" -v c1="$cpu" -v rc=$rc 'BEGIN {
    split(c0, a, " "); split(c1, b, " ")
    printf "%s\t%.1f\t%.1f\t%.1f\t%d\n", l, t1 - t0 - w, b[1] - a[1], b[2] - a[2], rc }' >> "$results/phases.tsv"
  return $rc
}
# locked CMD...: CMD holding the lock; the time it waited for it is recorded in
# results/lock-wait (seconds) and left out of the phase's wall time.
locked() {
  if [ -z "$lock" ]; then "$@"; return; fi
  local t0; t0=$(date +%s.%N)
  flock "$lock" bash -c 'awk -v t0="$1" -v t1="$(date +%s.%N)" "BEGIN {printf \"%.1f\n\", t1 - t0}" > "$2"; shift 2; exec "$@"' _ "$t0" "$results/lock-wait" "$@"
}

start=$(date +%s)
rc=0
if [ $target = run ]; then
  if [ -n "$lock" ]; then
    # What make run builds first runs without the lock (its recipe's prepare.sh, or at
    # older commits its prerequisites), then make run itself, which finds it built.
    prereq=$(sed -n 's/^run: *\([^#]*\)##.*/\1/p' "$src/Makefile" | sed 's/\$(if.*//')
    if [ -x "$src/test/tools/prepare.sh" ]; then # what make run's recipe does first
      timed "make run: build (test/tools/prepare.sh run)" env MAKE=make test/tools/prepare.sh run || rc=$?
    elif [ -n "$prereq" ]; then
      # shellcheck disable=SC2086
      timed "make run: build (make $prereq)" make $prereq "${makevars[@]}" || rc=$?
    else
      echo "cold-start.sh: cannot tell what make run builds at $ref; run it without --lock" >&2; exit 2
    fi
    [ $rc -ne 0 ] || timed "make run: the rest, holding $lock" locked make run "${makevars[@]}" || rc=$?
  else
    timed "make run" make run "${makevars[@]}" || rc=$?
  fi
elif $build_only; then
  for p in $(sed -n 's/^test: *\([^#]*\)##.*/\1/p' "$src/Makefile"); do
    timed "make $p" make "$p" "${makevars[@]}" || { rc=$?; break; }
  done
  [ $rc -ne 0 ] || timed "test binaries (go test -exec /bin/true ./...)" go test -count=1 -exec /bin/true ./... || rc=$?
else
  timed "make test" locked make test "${makevars[@]}" || rc=$?
fi
total=$(( $(date +%s) - start ))
waited=$(awk -F'\t' '{ if (match($1, /after [0-9.]+ s waiting/)) { split(substr($1, RSTART + 6), w, " "); s += w[1] } } END { printf "%d", s }' "$results/phases.tsv")
total=$((total - waited))
kill "$sampler" 2>/dev/null || true; sampler=
load_after=$(loadavg)
load_mean=$(awk '{s += $1; n++} END {if (n) printf "%.2f", s / n; else print "n/a"}' "$results/load.txt")
[ -f "$src/bin/k8s/build-times.tsv" ] && cp "$src/bin/k8s/build-times.tsv" "$results/steps.tsv" || : > "$results/steps.tsv"

{
  echo "## Cold \`make $target\`$($build_only && echo ' (build steps only)'), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- commit $commit ($ref), fresh clone, empty GOMODCACHE and GOCACHE (scratch), Debian packages $($remove_deb && echo removed first || echo as installed)"
  echo "- machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(go version | cut -d' ' -f3)"
  echo "- load average: before $load_before, mean during $load_mean (1-min, every 10 s), after $load_after"
  echo "- exit status $rc, wall $((total / 60)) min $((total % 60)) s$([ "$waited" -eq 0 ] || echo " (not counting $waited s waiting for the cluster lock)")"
  echo
  echo "| phase | wall s | user s | sys s | CPU s (user + sys) |"
  echo "|---|---:|---:|---:|---:|"
  awk -F'\t' '{printf "| %s | %.0f | %.0f | %.0f | %.0f |\n", $1, $2, $3, $4, $3 + $4}' "$results/phases.tsv"
  if [ -s "$results/steps.tsv" ]; then
    echo
    echo "Steps inside (bin/k8s/build-times.tsv; the Debian packages overlap the builds):"
    echo
    echo "| step | wall s | user s | sys s | CPU s |"
    echo "|---|---:|---:|---:|---:|"
    awk -F'\t' '{printf "| %s | %.0f | %.0f | %.0f | %.0f |\n", $1, $2, $3, $4, $3 + $4}' "$results/steps.tsv"
  fi
} | tee "$results/result.md"
echo "(results: $results)"
$keep || echo "(scratch caches and clone removed; the results stay in $results)"
exit $rc
