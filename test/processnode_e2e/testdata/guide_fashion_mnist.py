"""The shape of the function in Kubeflow's PyTorch guide, as the SDK ships it.

What matters here is what the guide's function does with the runtime it names
(torch-distributed, unchanged): torchrun starts the ranks from the PET_*
variables alone, the process group forms across the nodes, and local rank 0 of
each node downloads Fashion-MNIST into "./data", relative to the working
directory (the container's own root on a process node), before a barrier.
Without a network the download fails; the test reads how far it got.
"""


def train_fashion_mnist():
    import os

    import torch
    import torch.distributed as dist
    from torchvision import datasets, transforms

    device, backend = ("cuda", "nccl") if torch.cuda.is_available() else ("cpu", "gloo")
    print(f"GUIDE device={device} backend={backend}", flush=True)
    local_rank = int(os.getenv("LOCAL_RANK", 0))
    dist.init_process_group(backend=backend)
    print(f"GUIDE world_size={dist.get_world_size()} rank={dist.get_rank()} local_rank={local_rank}", flush=True)
    if local_rank == 0:
        print(f"GUIDE downloading into {os.path.abspath('./data')}", flush=True)
        datasets.FashionMNIST("./data", train=True, download=True, transform=transforms.ToTensor())
    dist.barrier()
    print("GUIDE data ready", flush=True)


train_fashion_mnist()
