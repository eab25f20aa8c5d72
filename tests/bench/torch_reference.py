#!/usr/bin/python3
"""PyTorch reference for strata's training benchmark (tests/bench/bench_training.cpp).

Trains one model at one batch size on random Fashion-MNIST-shaped data and prints one JSON line:
{"model": ..., "batch": ..., "samples_per_s": <median>, "repeats": [...], ...}.
The C++ benchmark runs this per row, right after measuring strata on the same row, so that both
sides see the same machine load.

Run it with Debian's interpreter (/usr/bin/python3, which has torch 1.13) under
OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE: without them torch's MLP is 4-5x slower
and the comparison would flatter strata.
"""

import argparse
import json
import os
import statistics
import sys
import time

# Exit code the C++ side turns into "install torch" advice.
EXIT_NO_TORCH = 3

try:
    import torch
    from torch import nn
except ImportError as error:
    print(f"torch_reference.py: cannot import torch with {sys.executable} ({error}); "
          "install it with jobs/install_deps.sh --with-torch", file=sys.stderr)
    sys.exit(EXIT_NO_TORCH)


def design_cnn():
    """configs/fashion_cnn.yaml's layers: no padding, 317 066 parameters."""
    return nn.Sequential(
        nn.Conv2d(1, 32, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10))


def mlp():
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


MODELS = {"cnn": design_cnn, "mlp": mlp}


class Run:
    """One model training on a fixed random data set, batches drawn from a shuffled order like strata's epochs."""

    def __init__(self, model_name, batch, samples, lr, momentum, device):
        self.device = torch.device(device)
        self.model = MODELS[model_name]().to(self.device)
        self.batch = batch
        self.images = torch.randn(samples, 1, 28, 28)
        self.labels = torch.randint(0, 10, (samples,))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=momentum)
        self.loss = nn.CrossEntropyLoss()
        self.order = torch.randperm(samples)
        self.cursor = 0

    def step(self):
        if self.cursor + self.batch > len(self.order):
            self.order = torch.randperm(len(self.order))
            self.cursor = 0
        rows = self.order[self.cursor:self.cursor + self.batch]
        self.cursor += self.batch
        self.optimizer.zero_grad(set_to_none=True)
        # On a GPU each batch crosses to it, as strata's trainer uploads its shard every step.
        images = self.images[rows].to(self.device)
        labels = self.labels[rows].to(self.device)
        loss = self.loss(self.model(images), labels)
        loss.backward()
        self.optimizer.step()

    def timed(self, steps):
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start


def measure(run, warmup_seconds, seconds, repeats):
    """Warm up, size a repeat to about `seconds`, and return samples/s of each repeat."""
    steps, elapsed = 0, 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_seconds or steps < 5:
        elapsed = run.timed(1)
        steps += 1
    # The last warm step is the best estimate of the steady state (the first ones allocate).
    steps_per_repeat = max(5, round(seconds / max(elapsed, 1e-6)))
    return [steps_per_repeat * run.batch / run.timed(steps_per_repeat) for _ in range(repeats)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=3.0, help="per timed repeat")
    parser.add_argument("--warmup-seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--samples", type=int, default=8192, help="size of the random training set")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (tests/bench/run_gpu_bench.sh)")
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("torch_reference.py: torch sees no CUDA GPU", file=sys.stderr)
        sys.exit(EXIT_NO_TORCH)

    torch.manual_seed(1)
    torch.set_num_threads(args.threads)
    run = Run(args.model, args.batch, args.samples, args.lr, args.momentum, args.device)
    rates = measure(run, args.warmup_seconds, args.seconds, args.repeats)
    print(json.dumps({
        "model": args.model,
        "batch": args.batch,
        "samples_per_s": statistics.median(rates),
        "repeats": rates,
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "parameters": sum(p.numel() for p in run.model.parameters()),
        "env": {k: os.environ.get(k, "") for k in ("OPENBLAS_CORETYPE", "OMP_WAIT_POLICY")},
    }), flush=True)


if __name__ == "__main__":
    main()
