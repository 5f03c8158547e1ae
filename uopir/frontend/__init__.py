"""Ways into the IR: the lazy Tensor API."""
