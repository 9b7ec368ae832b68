#!/usr/bin/env bash
# Installs the Debian packages the local cluster's container nodes run on
# (pkg/localcluster/containernode.go): containerd (each node runs its own, with its
# own root, state and socket), runc (its OCI runtime), the CNI plugins
# (bridge, host-local, loopback, portmap in /usr/lib/cni) and iptables (the
# bridge and portmap plugins call it). Only `trainyard-local up
# --container-nodes=N` and TestContainerNode need them; nothing else runs this.
# Idempotent: a stamp under /var/lib/trainyard records the installed set, so a
# warm machine pays one stat (and a dpkg query when the stamp is missing).
set -euo pipefail
PACKAGES=(containerd runc containernetworking-plugins iptables)
stamp=/var/lib/trainyard/container-node-packages.stamp
want="${PACKAGES[*]}"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then exit 0; fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing Debian packages for the container nodes: ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then echo "container-node-packages.sh: needs root (apt-get install ${missing[*]})" >&2; exit 1; fi
  apt-get update -qq
  # --no-install-recommends: containerd would otherwise pull in more than it runs with here.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The Debian package starts (and enables) a containerd service of its own on
  # /run/containerd/containerd.sock. The container nodes never use it; leave it be.
fi
mkdir -p "$(dirname "$stamp")"
echo "$want" > "$stamp"
