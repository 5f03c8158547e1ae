"""Ways out of the IR: renderers, compilers, runtimes and the reference interpreter."""
