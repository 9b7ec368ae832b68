#!/usr/bin/env bash
# Installs the Debian packages the process node's pods use from the host (only
# /usr/bin/python3 sees them): torch, torchvision and the Fashion-MNIST data for
# the torchrun examples, OpenMPI, sshd and mpi4py for the MPI runtimes, XGBoost and scikit-learn (its bundled
# datasets) for the XGBoost runtime; and debootstrap, with which `make images`
# (pkg/images) makes the rootfs of the training images that container nodes
# run (the same packages, in images). Each package is installed only when
# missing, so a warm machine pays one dpkg query.
set -euo pipefail
PACKAGES=(python3-torch python3-torchvision dataset-fashion-mnist openssh-server openmpi-bin python3-mpi4py python3-xgboost python3-sklearn debootstrap)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "== installing Debian packages for the process node's pods: ${missing[*]}"
# Without root the process node cannot run (namespaces), and its tests skip.
if [ "$(id -u)" -ne 0 ]; then echo "not root: skipping; the process node's pods will miss them" >&2; exit 0; fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
