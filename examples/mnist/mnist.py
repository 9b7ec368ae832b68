"""MNIST-style CNN trained with DistributedDataParallel across torchrun's nodes.

The data is generated, not downloaded: 8192 MNIST-shaped images (1x28x28, 10 classes),
each a fixed per-class template plus Gaussian noise, from a fixed seed, so every rank
builds the same data set and a DistributedSampler gives each rank its own half.

Run with torchrun (the TrainJob's torch-distributed runtime sets PET_NNODES,
PET_NODE_RANK, PET_MASTER_ADDR, ... so no flags are needed):

    torchrun mnist.py

or, as kubeflow.org/v1 PyTorchJobs run their scripts, without torchrun: the
default env:// init reads MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK, which a
PyTorchJob sets on every replica (nothing else is needed: no LOCAL_RANK):

    python3 mnist.py [--backend nccl]

--backend nccl (the v1 examples' flag) trains on the pod's GPU, cuda:LOCAL_RANK.

Every rank prints parseable lines:

    MNIST rank=<r> world_size=<w> ...            at the start
    MNIST step=<s> rank=<r> loss=<l>             every 50 steps
    MNIST_RESULT rank=<r> world_size=<w> first_loss=<l> last_loss=<l> \
        first_loss_mean=<l> last_loss_mean=<l> params_equal=<bool> ok=<bool>

first/last_loss are this rank's mean loss over the first and last 20 steps;
the *_mean values are those averaged over all ranks. The script exits non-zero when
the loss did not fall by at least half, the ranks' parameters differ, or the world
size is not EXPECT_WORLD_SIZE (when set).

Rank 0 reports its progress, time left and loss to the TrainJob's status server
(ProgressReporter, standard library only) when the pod has the
KUBEFLOW_TRAINER_SERVER_* variables; `trainyard wait` then draws a bar.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

STEPS = int(os.environ.get("MNIST_STEPS", "300"))
BATCH = 32
SAMPLES = 8192
WINDOW = 20


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


def synthetic_mnist():
    g = torch.Generator().manual_seed(1234)
    templates = torch.randn(10, 1, 28, 28, generator=g)
    labels = torch.randint(0, 10, (SAMPLES,), generator=g)
    images = templates[labels] + 1.5 * torch.randn(SAMPLES, 1, 28, 28, generator=g)
    return TensorDataset(images, labels)


class ProgressReporter:
    """Reports training progress to the TrainJob's status server (Kubeflow
    Trainer's protocol; Trainyard serves it), so that `kubectl get trainjob`,
    `trainyard get` and `trainyard wait` show it. Standard library only. The
    server's URL, its CA and this pod's token come from the three
    KUBEFLOW_TRAINER_SERVER_* variables; without them (another job kind, the
    feature off) it does nothing. At most one report every `every` seconds,
    plus the last one; a failed report is printed once and never stops training.
    """

    def __init__(self, every=2.0):
        self.url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
        self.ca = os.environ.get("KUBEFLOW_TRAINER_SERVER_CA_CERT")
        self.token_file = os.environ.get("KUBEFLOW_TRAINER_SERVER_TOKEN")
        self.every, self.last, self.warned = every, 0.0, False

    def report(self, percent, remaining=None, metrics=None, final=False):
        if not (self.url and self.ca and self.token_file):
            return
        now = time.time()
        if not final and now - self.last < self.every:
            return
        self.last = now
        import datetime
        import json
        import ssl
        import urllib.request
        status = {"progressPercentage": int(percent),
                  "lastUpdatedTime": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        if remaining is not None:
            status["estimatedRemainingSeconds"] = max(int(remaining), 0)
        if metrics:
            status["metrics"] = [{"name": k, "value": str(v)} for k, v in metrics.items()]
        try:
            with open(self.token_file) as f:
                token = f.read().strip()
            req = urllib.request.Request(self.url, data=json.dumps({"trainerStatus": status}).encode(), method="POST",
                                         headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
            urllib.request.urlopen(req, context=ssl.create_default_context(cafile=self.ca), timeout=5).close()
        except Exception as e:  # progress is nice to have: never fail the training for it
            if not self.warned:
                print(f"MNIST progress report failed (training goes on): {e}", flush=True)
                self.warned = True


def main():
    # --backend as Kubeflow's v1 mnist example takes it: nccl trains on the GPU
    # the pod was given (cuda:LOCAL_RANK; one per process), gloo on CPUs.
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    args, _ = parser.parse_known_args()
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend)  # env://: MASTER_ADDR/PORT, RANK, WORLD_SIZE from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    on = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"MNIST rank={rank} world_size={world} WORLD_SIZE={os.environ.get('WORLD_SIZE')} "
          f"RANK={os.environ.get('RANK')} MASTER_ADDR={os.environ.get('MASTER_ADDR')} "
          f"MASTER_PORT={os.environ.get('MASTER_PORT')} hostname={os.uname().nodename} "
          f"torch={torch.__version__} threads={torch.get_num_threads()} backend={args.backend} "
          f"device={on.replace(' ', '-')}", flush=True)

    torch.manual_seed(0)
    data = synthetic_mnist()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=BATCH, sampler=sampler)
    model = DDP(Net().to(device), device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    progress = ProgressReporter() if rank == 0 else None
    if progress:
        progress.report(0, final=True)
    losses, step, epoch, start = [], 0, 0, time.time()
    while step < STEPS:
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            step += 1
            if step % 50 == 0 or step == 1:
                print(f"MNIST step={step} rank={rank} loss={loss.item():.4f}", flush=True)
            if progress:
                per_step = (time.time() - start) / step
                progress.report(100 * step // STEPS, per_step * (STEPS - step), {"loss": f"{loss.item():.4f}"})
            if step >= STEPS:
                break
        epoch += 1

    first = sum(losses[:WINDOW]) / WINDOW
    last = sum(losses[-WINDOW:]) / WINDOW
    means = torch.tensor([first, last], device=device)
    dist.all_reduce(means)
    means /= world
    # Every rank must end with rank 0's parameters (DDP keeps them in step).
    equal = torch.tensor(1.0, device=device)
    for p in model.parameters():
        ref = p.detach().clone()
        dist.broadcast(ref, 0)
        if not torch.allclose(ref, p.detach()):
            equal = torch.tensor(0.0, device=device)
    dist.all_reduce(equal, op=dist.ReduceOp.MIN)
    params_equal = bool(equal.item() == 1.0)

    expect = os.environ.get("EXPECT_WORLD_SIZE")
    ok = means[1].item() <= 0.5 * means[0].item() and params_equal and (not expect or int(expect) == world)
    print(f"MNIST_RESULT rank={rank} world_size={world} steps={step} first_loss={first:.4f} last_loss={last:.4f} "
          f"first_loss_mean={means[0].item():.4f} last_loss_mean={means[1].item():.4f} "
          f"params_equal={params_equal} seconds={time.time() - start:.1f} ok={ok}", flush=True)
    if progress:
        progress.report(100, 0, {"loss": f"{last:.4f}", "loss_mean": f"{means[1].item():.4f}"}, final=True)
    dist.barrier()
    # Every rank is done. torch 1.13 (Debian's) now and then hangs in the process
    # group's teardown or at interpreter exit, which keeps torchrun (and the other
    # nodes, in their exit barrier) waiting: leave at once instead.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
