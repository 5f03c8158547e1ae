"""The dialect-agnostic core: UOp, dtypes, the op registry, rewriting, text IR, verification, diagnostics."""
