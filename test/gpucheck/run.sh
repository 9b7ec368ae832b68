#!/usr/bin/env bash
# The GPU check, on a machine with GPUs (as root, from the repository's root,
# after test/gpucheck/prepare.sh here and with bin/gpucheck carried there):
#
#   bash test/gpucheck/run.sh
#
# runs `trainyard-node gpu-check` (pkg/processnode/gpucheck.go): the process
# node's discovery with the real nvidia-smi, its allocator, and in sandboxes
# like the agent's a pod asking for one GPU, which trains
# examples/fashion-mnist/train.py (the PyTorch guide's training: torchrun, one
# node, one process per GPU, NCCL) on the GPU it was given, and a pod asking for
# none, which must see no GPU. NVIDIA_SMI=path uses another nvidia-smi (a fake
# one here: the guide then trains on the CPU with gloo). The output goes to
# stdout and, where $OUT is set (the device tool), to $OUT/gpucheck.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
pack=$repo/bin/gpucheck
work=$(mktemp -d /tmp/gpucheck.XXXXXX)
log=${OUT:+$OUT/gpucheck.log}
exec > >(tee ${log:+"$log"}) 2>&1
echo "== $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs"
gunzip -c "$pack/trainyard-node.gz" > "$work/trainyard-node"
chmod +x "$work/trainyard-node"
mkdir -p "$work/run/data/FashionMNIST/raw"
for f in "$pack"/data/*-ubyte.gz; do
	gunzip -c "$f" > "$work/run/data/FashionMNIST/raw/$(basename "$f" .gz)"
done
# The pods' PATH is a container's default; the Python that has torch may be
# elsewhere (a venv), so its directory goes first.
py=""
for p in python3 /usr/bin/python3 /usr/local/bin/python3; do
	if command -v "$p" >/dev/null && "$p" -c 'import torch' 2>/dev/null; then py=$(command -v "$p"); break; fi
done
if [ -z "$py" ]; then echo "no python3 with torch on this machine" >&2; exit 1; fi
echo "== python: $py, torch $("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())')"
path="$(dirname "$py"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
(command -v nvidia-smi || ls /usr/local/nvidia/bin/nvidia-smi) >/dev/null 2>&1 && \
	{ "$(command -v nvidia-smi || echo /usr/local/nvidia/bin/nvidia-smi)" -L || true; }
start=$(date +%s)
"$work/trainyard-node" gpu-check ${NVIDIA_SMI:+--nvidia-smi "$NVIDIA_SMI"} \
	--state-dir "$work/state" --gpus 1 --workdir "$work/run" \
	--env "PATH=$path" --env PYTHONUNBUFFERED=1 --env OMP_NUM_THREADS=1 \
	--env PET_NNODES=1 --env PET_NPROC_PER_NODE=1 --env PET_NODE_RANK=0 \
	--env PET_MASTER_ADDR=127.0.0.1 --env PET_MASTER_PORT=29500 \
	--cpu-command "python3 -c 'import sys, torch; n = torch.cuda.device_count(); print(\"cpu pod sees\", n, \"GPUs\"); sys.exit(n != 0)'" \
	-- sh -c "python3 -c 'import torch; print(\"gpu pod sees\", torch.cuda.device_count(), \"GPU(s):\", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])' && exec python3 -m torch.distributed.run $repo/examples/fashion-mnist/train.py"
echo "== gpu-check took $(( $(date +%s) - start ))s"
rm -rf "$work"
