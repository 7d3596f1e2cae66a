"""The PyTorch peer of `elasticdl train` for bench/train_bench.sh.

The seed CNN of model_zoo/mnist/mnist_functional_api.cc layer for layer, trained
with DistributedDataParallel (gloo) on Fashion-MNIST, as a PyTorch user would
write it. Run under torchrun, e.g.

  OMP_NUM_THREADS=1 /usr/bin/python3 -m torch.distributed.run --standalone \
      --nproc_per_node=2 --redirects 2 --tee 2 bench/ddp_mnist.py --records=30000

Each process: torch.set_num_threads(--threads), DistributedSampler over the
first --records training images, batch --batch, SGD(lr=0.1), cross entropy.
Images are decoded from the IDX files once, before timing (a TensorDataset);
each batch is divided by 255 in the loop, as dataset_fn does per record.

The timed window opens on every rank after its first --warmup minibatches
(and a barrier) and closes after its last; samples/s = samples all ranks
trained in the window / the longest rank's window. Prints one line
"RESULT ddp ..." on rank 0.
"""
import argparse
import gzip
import os
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def make_model():
    return nn.Sequential(
        nn.Unflatten(1, (1, 28)),  # [B, 28, 28] -> [B, 1, 28, 28]
        nn.Conv2d(1, 32, 3), nn.ReLU(),
        nn.Conv2d(32, 64, 3), nn.ReLU(),
        nn.BatchNorm2d(64),
        nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(9216, 10))


def bind_cores(local_rank, threads):
    """Every thread of this process, and those it starts later, on its cores."""
    allowed = sorted(os.sched_getaffinity(0))
    cpus = allowed[local_rank * threads:(local_rank + 1) * threads]
    if len(cpus) != threads:
        raise SystemExit(f"--bind_cores: rank {local_rank} x {threads} threads needs more than "
                         f"the {len(allowed)} CPUs this process may use")
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), cpus)


def epoch_batches(loader, sampler, epoch):
    """The loader's batches of one epoch, as they are drawn."""
    sampler.set_epoch(epoch)
    yield from loader


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mnist", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--records", type=int, default=30000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--bind_cores", action="store_true",
                   help="run each process on cores of its own: --threads of the CPUs it may "
                        "use, picked by LOCAL_RANK (as `elasticdl train` binds its workers "
                        "when their threads fill the cores)")
    p.add_argument("--log_steps", action="store_true",
                   help="print READY at start and a STEP line per step (allreduce_recovery.py)")
    args = p.parse_args()
    if args.bind_cores:
        bind_cores(int(os.environ["LOCAL_RANK"]), args.threads)

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.log_steps:
        print(f"READY rank={rank} pid={os.getpid()}", flush=True)

    images = read_idx(os.path.join(args.mnist, "train-images-idx3-ubyte.gz"))[:args.records]
    labels = read_idx(os.path.join(args.mnist, "train-labels-idx1-ubyte.gz"))[:args.records]
    dataset = TensorDataset(images.float(), labels.long())
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler)

    torch.manual_seed(0)
    model = DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()

    samples, start = 0, None
    batches = (b for epoch in range(args.epochs) for b in epoch_batches(loader, sampler, epoch))
    for i, (x, y) in enumerate(batches):
        if i == args.warmup:
            dist.barrier()
            start = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x / 255.0), y)
        loss.backward()
        opt.step()
        loss.item()
        if start is not None and i > args.warmup - 1:
            samples += x.shape[0]
        if args.log_steps:
            print(f"STEP rank={rank} step={i}", flush=True)
    window = time.perf_counter() - start
    t = torch.tensor([float(samples), window], dtype=torch.float64)
    w = torch.tensor([window], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    dist.all_reduce(w, op=dist.ReduceOp.MAX)
    if rank == 0:
        total = t[0].item()
        print("RESULT ddp procs=%d threads=%d samples_per_s=%.1f samples=%d wall_s=%.2f "
              "last_loss=%.3f" % (world, args.threads, total / w.item(), total, w.item(),
                                  loss.item()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
