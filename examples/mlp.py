"""A tiny MLP forward pass with the lazy Tensor frontend: build, print the tensor-dialect IR, then run it.

    python3 examples/mlp.py
"""
from __future__ import annotations

import pathlib
import sys

try:
    from uopir import Tensor, print_ir
except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from uopir import Tensor, print_ir


def main() -> None:
    Tensor.manual_seed(0)
    x = Tensor.randn(4, 8)  # a batch of 4 inputs with 8 features
    w1, b1 = Tensor.kaiming_uniform(8, 16), Tensor.zeros(16)
    w2, b2 = Tensor.kaiming_uniform(16, 3), Tensor.zeros(3)

    probs = x.linear(w1, b1).relu().linear(w2, b2).softmax()  # nothing has run yet

    print("// tensor-dialect IR of the forward pass")
    print(print_ir(probs.uop), end="")
    how = "the reference interpreter" if probs.device == "python" else "compiled kernels"
    print(f"// result (realized on device {probs.device!r}: {how})")
    print(probs.numpy())
    print("// predicted classes:", probs.argmax(axis=-1).tolist())


if __name__ == "__main__":
    main()
