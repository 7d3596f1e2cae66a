"""The bare PyTorch loop in Python for bench/python_bench.sh (P12).

The seed CNN (model_zoo/python/mnist/mnist_functional_api.py's layers, which
ddp_mnist.make_model also builds) trained in one process, as a PyTorch user
writes it: the first --records Fashion-MNIST training images decoded from the
IDX files into memory before timing, a random permutation per epoch, batches
of --batch divided by 255 in the loop, SGD(lr=0.1), cross entropy,
torch.set_num_threads(--threads). No tf.Example parsing, no parameter server:
the limit a Python model file run by ElasticDL is measured against.

The timed window opens after the first --warmup minibatches and closes after
the last; prints "RESULT torch ... samples_per_s=...".
"""
import argparse
import os
import time

import torch
import torch.nn.functional as F

from ddp_mnist import make_model, read_idx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mnist", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--records", type=int, default=30000)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    images = read_idx(os.path.join(args.mnist, "train-images-idx3-ubyte.gz"))[:args.records]
    labels = read_idx(os.path.join(args.mnist, "train-labels-idx1-ubyte.gz"))[:args.records]
    images, labels = images.float(), labels.long()

    torch.manual_seed(0)
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    order = torch.randperm(len(images))
    samples, start = 0, None
    for i, at in enumerate(range(0, len(images), args.batch)):
        if i == args.warmup:
            start = time.perf_counter()
        idx = order[at:at + args.batch]
        x, y = images[idx] / 255.0, labels[idx]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        if start is not None:
            samples += x.shape[0]
    window = time.perf_counter() - start
    print("RESULT torch threads=%d samples_per_s=%.1f samples=%d wall_s=%.2f last_loss=%.3f"
          % (args.threads, samples / window, samples, window, loss.item()), flush=True)


if __name__ == "__main__":
    main()
