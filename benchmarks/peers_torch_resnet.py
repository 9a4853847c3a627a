#!/usr/bin/python3
"""PyTorch peer of hypertune-train-bench: training-step throughput of the
reference ResNet (trainer_sdk/trainer/README.md) on synthetic data, printed as the same JSON.

  /usr/bin/python3 benchmarks/peers_torch_resnet.py --threads 2 --batch 128 --width 16
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, in_c, out_c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(in_c, out_c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_c)
        self.conv2 = nn.Conv2d(out_c, out_c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_c)
        self.shortcut = None
        if stride != 1 or in_c != out_c:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_c, out_c, 1, stride, 0, bias=False), nn.BatchNorm2d(out_c))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + (x if self.shortcut is None else self.shortcut(x)))


class ResNet(nn.Module):
    def __init__(self, in_channels, num_classes, width, depth, stages, imagenet_stem):
        super().__init__()
        if imagenet_stem:
            self.stem = nn.Sequential(
                nn.Conv2d(in_channels, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(in_channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                nn.ReLU(inplace=True))
        blocks, c = [], width
        for s in range(stages):
            out_c = width * 2 ** s
            for b in range(depth):
                blocks.append(BasicBlock(c, out_c, 2 if (s > 0 and b == 0) else 1))
                c = out_c
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--depth", type=int, default=1)
    p.add_argument("--stages", type=int, default=3)
    p.add_argument("--channels", type=int, default=1)
    p.add_argument("--size", default="28x28")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--imagenet", action="store_true",
                   help="ResNet-18-like: 3x224x224, imagenet stem, 4 stages, width 64, depth 2, 1000 classes")
    p.add_argument("--mixed-precision", action="store_true")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    if a.imagenet:
        a.channels, a.size, a.stages, a.width, a.depth, a.classes = 3, "224x224", 4, 64, 2, 1000
    h, w = (int(v) for v in a.size.split("x"))
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    model = ResNet(a.channels, a.classes, a.width, a.depth, a.stages, a.imagenet).to(dev)
    decay = [p_ for n, p_ in model.named_parameters() if p_.ndim > 1]
    plain = [p_ for n, p_ in model.named_parameters() if p_.ndim <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4},
                           {"params": plain, "weight_decay": 0.0}],
                          lr=0.01, momentum=0.9, nesterov=True)
    x = torch.randn(a.batch, a.channels, h, w, device=dev)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    scaler_ctx = (torch.autocast(device_type=dev.type, dtype=torch.bfloat16)
                  if a.mixed_precision else torch.autocast(device_type=dev.type, enabled=False))
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        with scaler_ctx:
            loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        loss = step()
    sync()
    cpu_start = time.process_time()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    print(json.dumps({
        "framework": "pytorch-" + torch.__version__, "device": a.device, "threads": a.threads,
        "batch": a.batch, "width": a.width, "depth": a.depth, "stages": a.stages,
        "input": "%dx%dx%d" % (a.channels, h, w), "classes": a.classes,
        "imagenet_stem": bool(a.imagenet), "steps": a.steps, "seconds": round(seconds, 4),
        "step_ms": round(1000 * seconds / a.steps, 3),
        "images_per_second": round(a.steps * a.batch / seconds, 1),
        "cpu_seconds": round(cpu_seconds, 4),
        "images_per_cpu_second": round(a.steps * a.batch / cpu_seconds, 1),
        "final_loss": round(float(loss), 4)}))


if __name__ == "__main__":
    main()
