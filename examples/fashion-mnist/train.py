"""Fashion-MNIST on N nodes with DistributedDataParallel: what `make run` trains.

A small CNN (two 5x5 convolutions with 20 and 50 channels, each followed by ReLU
and 2x2 max pooling, then fully connected layers of 500 and 10 units) on the 60,000
training images, 2 epochs of SGD (learning rate 0.1, momentum 0.9), batches of 100
per process, each process reading its own shard (DistributedSampler), gradients
averaged over NCCL on a GPU (the one the node was given) or gloo on CPUs.
torchrun starts the processes and sets RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT from the PET_* variables Trainyard gives each node.

The data is not downloaded: the runtime's dataset initializer has put the raw idx
files in ./data/FashionMNIST/raw (relative to the working directory the runtime
sets), where torchvision's FashionMNIST("./data") looks first. Rank 0 prints the
loss every 10 batches, then a summary line that `make run` reads, and reports
its progress (percentage, ETA, loss) to the TrainJob's status, where `kubectl get
trainjob`, `trainyard get`, `trainyard wait` and `trainyard logs -f` show it; its
last report's loss is the mean of the last 10 batches' (an OptimizationJob's
objective). As a trial of examples/fashion-mnist-tuning it takes its learning
rate and batch size from KUBEFLOW_TRAINER_OPT_LR and KUBEFLOW_TRAINER_OPT_BATCH_SIZE,
and FASHION_MNIST_EPOCHS, FASHION_MNIST_MAX_STEPS shorten it.
"""

import datetime
import json
import os
import ssl
import time
import urllib.request

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from torchvision import datasets, transforms

EPOCHS = int(os.environ.get("FASHION_MNIST_EPOCHS", "2"))
LOG_EVERY = 10
# An OptimizationJob's trial gets its parameters as KUBEFLOW_TRAINER_OPT_<NAME>
# (examples/fashion-mnist-tuning); without them, the guide's values.
LR = float(os.environ.get("KUBEFLOW_TRAINER_OPT_LR", "0.1"))
BATCH_SIZE = int(os.environ.get("KUBEFLOW_TRAINER_OPT_BATCH_SIZE", "100"))
# Stop each process after this many batches (0: every batch of every epoch).
MAX_STEPS = int(os.environ.get("FASHION_MNIST_MAX_STEPS", "0"))


def cnn() -> nn.Module:
    # 1x28x28 -> 20x24x24 -> 20x12x12 -> 50x8x8 -> 50x4x4 -> 800 -> 500 -> 10
    return nn.Sequential(
        nn.Conv2d(1, 20, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(20, 50, kernel_size=5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(50 * 4 * 4, 500), nn.ReLU(),
        nn.Linear(500, 10), nn.LogSoftmax(dim=1),
    )


def report_progress(percent: int, remaining: float, loss: float) -> None:
    """POSTs status.trainerStatus to the status server (Kubeflow Trainer's
    protocol) named by the KUBEFLOW_TRAINER_SERVER_* variables, with this pod's
    token; does nothing without them. A failed report never stops training."""
    url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
    ca = os.environ.get("KUBEFLOW_TRAINER_SERVER_CA_CERT")
    token_file = os.environ.get("KUBEFLOW_TRAINER_SERVER_TOKEN")
    if not (url and ca and token_file):
        return
    status = {
        "progressPercentage": percent,
        "estimatedRemainingSeconds": max(int(remaining), 0),
        "metrics": [{"name": "loss", "value": f"{loss:.4f}"}],
        "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    try:
        with open(token_file) as f:
            token = f.read().strip()
        request = urllib.request.Request(url, data=json.dumps({"trainerStatus": status}).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
        urllib.request.urlopen(request, context=ssl.create_default_context(cafile=ca), timeout=5).close()
    except Exception as e:  # progress is nice to have
        print(f"progress report failed (training goes on): {e}", flush=True)


def main() -> None:
    # NCCL on the GPU a node was given (CUDA_VISIBLE_DEVICES: the process node
    # and the device plugin show each pod only its own), gloo on CPUs.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device, backend = torch.device("cuda", local_rank), "nccl"
        torch.cuda.set_device(device)
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    on = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"rank {rank} of WORLD_SIZE {world} on {os.uname().nodename}, device {on}, backend {backend}, "
          f"data in {os.path.abspath('./data')}, torch {torch.__version__}", flush=True)

    train_set = datasets.FashionMNIST("./data", train=True, download=False, transform=transforms.ToTensor())
    shard = DistributedSampler(train_set)
    batches = DataLoader(train_set, batch_size=BATCH_SIZE, sampler=shard)

    model = cnn().to(device)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
    sgd = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    start = time.time()
    first = last = None
    recent = []  # the last LOG_EVERY losses: their mean is the final loss reported
    total, done, reported = EPOCHS * len(batches), 0, 0.0
    if MAX_STEPS > 0:
        total = min(total, MAX_STEPS)
    for epoch in range(1, EPOCHS + 1):
        shard.set_epoch(epoch)
        model.train()
        if done >= total:
            break
        for step, (images, targets) in enumerate(batches):
            if done >= total:
                break
            images, targets = images.to(device), targets.to(device)
            sgd.zero_grad()
            loss = F.nll_loss(model(images), targets)
            loss.backward()
            sgd.step()
            value = loss.item()
            first = value if first is None else first
            last = value
            recent = (recent + [value])[-LOG_EVERY:]
            done += 1
            if rank == 0 and time.time() - reported >= 2:  # at most one report every 2 s
                reported = time.time()
                elapsed = reported - start
                report_progress(100 * done // total, elapsed * (total - done) / done, value)
            if rank == 0 and step % LOG_EVERY == 0:
                seen = step * BATCH_SIZE * world
                print(f"Train Epoch: {epoch} [{seen}/{len(train_set)} ({100.0 * step / len(batches):.0f}%)]\tLoss: {value:.6f}",
                      flush=True)

    dist.barrier()
    if rank == 0:
        final = sum(recent) / len(recent)  # less noisy than one batch's: an objective to compare trials by
        report_progress(100, 0, final)
        print("Training is finished", flush=True)
        print(f"FASHION_MNIST_RESULT world_size={world} epochs={EPOCHS} lr={LR} batch_size={BATCH_SIZE} steps={done} "
              f"first_loss={first:.4f} last_loss={last:.4f} final_loss_mean={final:.4f} seconds={time.time() - start:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
