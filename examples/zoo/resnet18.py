"""ResNet-18 (and the other BasicBlock ResNets: ResNet-34 is [3, 4, 6, 3] blocks) with uopir.nn, with torchvision's
state-dict names (conv1, bn1, layer1.0.conv1, layer2.0.downsample.0, fc, ...), classifying one image.

    python examples/zoo/resnet18.py --random                      # tiny random network, random image
    python examples/zoo/resnet18.py --weights resnet18.safetensors [--image img.npy] [--top 5]

Real weights: torchvision's pretrained resnet18 (ImageNet, 1000 classes) is a PyTorch state dict; save it as
safetensors with the safetensors package's torch helper (save_file(model.state_dict(), "resnet18.safetensors")) on a
machine that has torch, or pass the .pth file itself where uopir can read PyTorch checkpoints. The depth, width and
class count are read from the tensors' shapes. The image is a .npy array of shape (3, 224, 224) or (224, 224, 3),
already scaled to [0, 1] and normalized with ImageNet's channel mean (0.485, 0.456, 0.406) and std (0.229, 0.224,
0.225), as torchvision's preprocessing does. It prints the top classes as ImageNet class indices and probabilities.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys
from dataclasses import dataclass

try:
    import uopir  # noqa: F401
except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
import zoo_common as zoo

from uopir import Tensor, nn


@dataclass(frozen=True)
class Config:
    blocks: tuple[int, ...] = (2, 2, 2, 2)  # BasicBlocks per stage
    width: int = 64  # channels of the stem and the first stage; each later stage doubles them
    classes: int = 1000
    image: int = 224


TINY = Config(blocks=(1, 1, 1, 1), width=4, classes=10, image=32)


class BasicBlock:
    """Two 3x3 convolutions with batch norm, added to the input (through a strided 1x1 conv where the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = ([nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)]
                           if stride != 1 or cin != cout else [])

    def __call__(self, x: Tensor) -> Tensor:
        out = self.bn1(self.conv1(x)).relu()
        out = self.bn2(self.conv2(out))
        return (out + x.sequential(self.downsample)).relu()


class ResNet:
    """The stem (7x7 stride-2 conv, batch norm, 3x3 stride-2 max pool), four stages of BasicBlocks (the first block of
    stages 2-4 halves the resolution), a global average pool and the classifier."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        w = cfg.width
        self.conv1 = nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(w)
        cin = w
        for i, n in enumerate(cfg.blocks):
            cout = w * 2 ** i
            stage = [BasicBlock(cin if j == 0 else cout, cout, 2 if i > 0 and j == 0 else 1) for j in range(n)]
            setattr(self, f"layer{i + 1}", stage)
            cin = cout
        self.fc = nn.Linear(cin, cfg.classes)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.bn1(self.conv1(x)).relu().max_pool2d(3, stride=2, padding=1)
        for i in range(len(self.cfg.blocks)):
            x = x.sequential(getattr(self, f"layer{i + 1}"))
        return self.fc(x.mean((2, 3)))


def config_of(sd: zoo.StateDict) -> Config:
    """The configuration whose tensors sd holds (torchvision's names), for any BasicBlock ResNet."""
    if "conv1.weight" not in sd or "fc.weight" not in sd:
        raise zoo.ZooError("not a torchvision-style ResNet state dict (no conv1.weight or fc.weight)")
    stages: dict[int, int] = {}
    for k in sd:
        m = re.match(r"layer(\d+)\.(\d+)\.", k)
        if m:
            s, b = int(m[1]), int(m[2])
            stages[s] = max(stages.get(s, 0), b + 1)
    if not stages or sorted(stages) != list(range(1, len(stages) + 1)):
        raise zoo.ZooError(f"the ResNet's stages are not layer1..layerN: {sorted(stages)}")
    if any(k.endswith("conv3.weight") for k in sd):
        raise zoo.ZooError("Bottleneck ResNets (ResNet-50 and up: conv3 in each block) are not in this example")
    return Config(blocks=tuple(stages[s] for s in sorted(stages)), width=zoo.shape_of(sd["conv1.weight"])[0],
                  classes=zoo.shape_of(sd["fc.weight"])[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawTextHelpFormatter)
    zoo.weights_args(ap)
    ap.add_argument("--image", metavar="FILE.npy", help="a normalized (3, H, W) or (H, W, 3) image (default: random)")
    ap.add_argument("--top", type=int, default=5, help="how many classes to print (default 5)")
    args = ap.parse_args(argv)
    zoo.use_device(args.device)
    sd = zoo.read_weights(args.weights) if args.weights else None
    cfg = config_of(sd) if sd is not None else TINY
    model = ResNet(cfg)
    zoo.load(model, sd if sd is not None else zoo.random_state_dict(model, args.seed))
    x = zoo.read_image(args.image, cfg.image, args.seed)
    logits = model(Tensor(x)).numpy()[0]
    print(f"ResNet blocks {list(cfg.blocks)}, width {cfg.width}, {cfg.classes} classes; top {args.top}:")
    for c, p in zoo.top_k(logits, args.top):
        print(f"  class {c:5d}  p = {p:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(zoo.run_main(main))
