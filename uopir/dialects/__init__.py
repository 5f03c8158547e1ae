"""The dialects; importing this package registers every op of each."""
from uopir.dialects import core, device, kernel, tensor  # noqa: F401
