#!/usr/bin/env bash
# Prepares, under bin/gpucheck, what test/gpucheck/run.sh needs on a machine with
# GPUs but no Go toolchain and no network, which receives only a copy of the
# working tree of at most 64 MiB: trainyard-node (static, stripped, gzipped) and
# Debian's Fashion-MNIST (.gz, as packaged). bin/ is ignored by git, so name
# bin/gpucheck in the device tool's `carry`. Prints the sizes and fails when the
# tree and the payload together pass the limit.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bin/gpucheck
limit=$((64 * 1024 * 1024))
data=/usr/share/datasets/fashion-mnist
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
	pkg/localcluster/packages/debian-packages.sh
fi
rm -rf "$out" && mkdir -p "$out/data"
start=$(date +%s)
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/trainyard/trainyard/pkg/version.Version=$version" \
	-o "$out/trainyard-node" ./cmd/trainyard-node
raw=$(stat -c %s "$out/trainyard-node")
gzip -9 "$out/trainyard-node"
cp "$data"/*-ubyte.gz "$out/data/"
payload=$(du -cb "$out" | tail -1 | cut -f1)
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "trainyard-node: $raw bytes stripped, $(stat -c %s "$out/trainyard-node.gz") gzipped (built in $(( $(date +%s) - start ))s)"
echo "Fashion-MNIST: $(du -cb "$out/data" | tail -1 | cut -f1) bytes"
echo "payload $payload + working tree $tree = $((payload + tree)) bytes of $limit"
if [ $((payload + tree)) -gt $limit ]; then
	echo "over the device tool's limit" >&2
	exit 1
fi
