package flux

import (
	"fmt"
	"strconv"
	"strings"
)

// Paths shared by the init container, the node container and the scripts.
const (
	fluxRoot      = "/mnt/flux"
	configDir     = "/etc/flux-config"
	curveDir      = "/curve"
	softwareDir   = "/opt/software"
	entrypointKey = "entrypoint.sh"
	initKey       = "init.sh"
	curveKey      = "curve.cert"
	brokerPort    = 8050
)

// scriptParams is what the scripts are rendered from.
type scriptParams struct {
	Job           string // TrainJob name; the broker.toml metadata
	Namespace     string
	Subdomain     string // the JobSet's headless Service
	ClusterDomain string
	Hostlist      string // e.g. job-node-0-[0-3]
	LeadHost      string // host name of the pod that runs the command
	Nodes         int32
	Tasks         int32 // per node
	GPUs          int64 // per node
	NetworkDevice string
	QueuePolicy   string
}

// initScript runs in the flux-installer init container, whose image holds a
// Spack view of Flux under /opt/view (and the packages it links to under
// /opt/software). It leaves everything the node container needs on the
// flux-install volume: the broker config, the host list, and Flux itself.
var initScript = `#!/bin/bash
# flux-installer: prepares Flux for TrainJob {{.Job}} on the flux-install volume.
set -euo pipefail

root=` + fluxRoot + `
mkdir -p "$root/config/etc/flux/system" "$root/config/etc/flux/config" "$root/config/etc/curve" \
  "$root/config/var/lib/flux" "$root/config/run/flux"

# Every broker of the instance, one per pod of the node job.
echo '{{.Hostlist}}' > "$root/config/etc/flux/system/hostlist"

cat > "$root/config/etc/flux/config/broker.toml" <<'TOML'
[access]
allow-guest-user = true
allow-root-owner = true

[resource]
path = "/mnt/flux/config/etc/flux/system/R"

[bootstrap]
curve_cert = "/mnt/flux/config/etc/curve/curve.cert"
default_port = ` + fmt.Sprint(brokerPort) + `
default_bind = "tcp://{{.NetworkDevice}}:%p"
default_connect = "tcp://%h.{{.Subdomain}}.{{.Namespace}}.svc.{{.ClusterDomain}}:%p"
hosts = [{ host = "{{.Hostlist}}" }]

[archive]
dbpath = "/mnt/flux/config/var/lib/flux/job-archive.sqlite"
period = "1m"
busytimeout = "50s"

[sched-fluxion-qmanager]
queue-policy = "{{.QueuePolicy}}"
TOML

# Flux runs from the volume in the node container, whose image need not have it.
# The view links into /opt/software, which the node container mounts at the
# same path and fills from the copy (see entrypoint.sh).
mkdir -p "$root/view" "$root/software"
cp -a /opt/view/. "$root/view/"
cp -a ` + softwareDir + `/. "$root/software/"
`

// entrypointScript wraps the node container's command: it starts one Flux
// broker per pod; the broker on the first pod runs the command across all of
// them with flux run, the others follow until the instance ends.
var entrypointScript = `#!/bin/bash
# Runs the TrainJob {{.Job}} command under Flux: /bin/bash entrypoint.sh "<command>".
set -euo pipefail
command="${1:-}"

root=` + fluxRoot + `
cp -a "$root/software/." ` + softwareDir + `/
export PATH="$root/view/bin:$PATH"
export LD_LIBRARY_PATH="$root/view/lib:${LD_LIBRARY_PATH:-}"

# The brokers authenticate each other with the TrainJob's CURVE certificate.
install -m 0400 ` + curveDir + `/` + curveKey + ` "$root/config/etc/curve/curve.cert"

# The resources of the instance: {{.Tasks}} core(s){{.GPUNote}} on each host.
flux R encode --hosts='{{.Hostlist}}' --cores=0-{{.LastCore}}{{.GPURange}} > "$root/config/etc/flux/system/R"

start=(flux start -o --config-path="$root/config/etc/flux/config")
if [ "$(hostname)" = '{{.LeadHost}}' ]; then
  if [ -z "$command" ]; then
    # No command: a bare instance, for jobs submitted with flux proxy.
    exec "${start[@]}" sleep infinity
  fi
  # The command is one string; word splitting makes it argv again.
  # shellcheck disable=SC2086
  exec "${start[@]}" flux run -N {{.Nodes}} -n {{.TotalTasks}}{{.GPUFlag}} $command
fi
# A follower joins the lead broker; it retries until the instance it joined ends normally.
until "${start[@]}"; do
  echo "flux broker on $(hostname) exited with an error; retrying in 15s" >&2
  sleep 15
done
`

// renderScripts returns the two scripts of the entrypoint ConfigMap. Each
// {{.Name}} in them is replaced by its value, in one pass (a value is never
// scanned for more names). Not text/template: a program that links it keeps
// every exported method of every type it converts to an interface (templates
// call methods by name, so the linker cannot drop any), which made the
// manager's binary 13.6 MB larger (63.9 against 50.3 MB) and its resident
// pages with it (docs/performance.md, issue 29).
func renderScripts(p scriptParams) (map[string]string, error) {
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	var gpuNote, gpuRange, gpuFlag string
	if p.GPUs != 0 {
		gpuNote = " and " + itoa(p.GPUs) + " GPU(s)"
		// Flux numbers cores and GPUs from 0: the ranges end at n-1.
		gpuRange = " --gpu=0-" + itoa(p.GPUs-1)
		gpuFlag = " -g " + itoa(p.GPUs)
	}
	values := strings.NewReplacer(
		"{{.Job}}", p.Job,
		"{{.Namespace}}", p.Namespace,
		"{{.Subdomain}}", p.Subdomain,
		"{{.ClusterDomain}}", p.ClusterDomain,
		"{{.Hostlist}}", p.Hostlist,
		"{{.LeadHost}}", p.LeadHost,
		"{{.NetworkDevice}}", p.NetworkDevice,
		"{{.QueuePolicy}}", p.QueuePolicy,
		"{{.Nodes}}", itoa(int64(p.Nodes)),
		"{{.Tasks}}", itoa(int64(p.Tasks)),
		"{{.TotalTasks}}", itoa(int64(p.Tasks)*int64(p.Nodes)),
		"{{.LastCore}}", itoa(int64(p.Tasks)-1),
		"{{.GPUNote}}", gpuNote,
		"{{.GPURange}}", gpuRange,
		"{{.GPUFlag}}", gpuFlag,
	)
	return map[string]string{initKey: values.Replace(initScript), entrypointKey: values.Replace(entrypointScript)}, nil
}
