"""ResNet-18 (He et al. 2015) written with uopir.nn, with torchvision's state-dict names, so that torchvision's
resnet18 weights (a .pth checkpoint, or a safetensors file of the same keys) load as they are.

    python3 examples/zoo/resnet18.py [--weights resnet18.pth] [--width 64] [--size 224] [--device c]

Without --weights the network keeps its random initialisation. `width` scales every stage (64: the real network; the
tests use 4). Inference only: BatchNorm uses its running statistics.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from zoo_weights import load_into, read_weights, run_main  # noqa: E402

from uopir import Tensor, nn  # noqa: E402


class BasicBlock:
    """Two 3x3 convolutions with BatchNorm and a shortcut (a strided 1x1 conv + BatchNorm where the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm(cout)
        # torchvision's nn.Sequential(conv, bn): keys downsample.0.* and downsample.1.*
        self.downsample = [nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm(cout)] \
            if stride != 1 or cin != cout else []

    def __call__(self, x: Tensor) -> Tensor:
        out = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        short = self.downsample[1](self.downsample[0](x)) if self.downsample else x
        return (out + short).relu()


class ResNet18:
    """conv 7x7/2 -> maxpool 3x3/2 -> 4 stages of 2 BasicBlocks (width, 2, 4, 8 x width) -> global mean -> fc."""

    def __init__(self, num_classes: int = 1000, width: int = 64) -> None:
        self.conv1, self.bn1 = nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm(width)
        cin = width
        for i in range(4):
            cout = width * 2 ** i
            setattr(self, f"layer{i + 1}", [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)])
            cin = cout
        self.fc = nn.Linear(cin, num_classes)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.bn1(self.conv1(x)).relu().max_pool2d(kernel_size=3, stride=2, padding=1)
        for stage in (self.layer1, self.layer2, self.layer3, self.layer4):
            for block in stage:
                x = block(x)
        return self.fc(x.mean(axis=(2, 3)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", help="a .pth/.pt checkpoint or .safetensors file with torchvision's keys")
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--size", type=int, default=224, help="the input image's side")
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    sd = read_weights(args.weights) if args.weights else None  # a bad file fails before the model is built
    model = ResNet18(args.classes, args.width)
    if sd is not None:
        load_into(model, sd)
    x = Tensor(np.random.default_rng(0).standard_normal((1, 3, args.size, args.size), np.float32), device=args.device)
    probs = model(x).softmax().numpy()[0]
    top = np.argsort(-probs)[:5]
    print("top-5 classes:", ", ".join(f"{int(c)} ({probs[c]:.3f})" for c in top))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
