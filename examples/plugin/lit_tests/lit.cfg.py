# ruff: noqa: F821  (lit injects `config` and `lit_config`)
"""The mydsl plugin's lit suite: uopir's substitutions (%uop-opt, %uop-run, %roundtrip, %filecheck) with the plugin
loaded by --load-plugin, so it runs from a checkout with or without `pip install`."""
import os

from uopir.tools.lit_support import configure

configure(config, lit_config, name="uopir-mydsl", plugins=["uopir_mydsl:register"],
          paths=[os.path.dirname(os.path.dirname(__file__))])
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.test_source_root
