"""The pass manager's public names in one place (a facade): import from here, or from the module that does the job.

    uopir.passes.registry      register_pass / register_pipeline / register_anchor, PassInfo, load_passes
    uopir.passes.options       typed pass options: conversion from and formatting to pipeline text
    uopir.passes.pipeline      the pipeline text: parser, PassStep / AnchorStep
    uopir.passes.runner        PassManager (runs steps, calls instruments), PassContext
    uopir.passes.instruments   PassInstrumentation and the standard instruments (IR printing, verification,
                               timing, statistics, reproducers)
    uopir.passes.errors        PipelineError, PassFailure, PassCrash
    uopir.ir.regions           map_regions and the other region-walking helpers
"""
from __future__ import annotations

from uopir.ir.regions import map_regions
from uopir.passes.errors import PassCrash, PassFailure, PipelineError
from uopir.passes.instruments import (
    DUMP_HEADER,
    CrashEvent,
    IRPrinter,
    PassEvent,
    PassInstrumentation,
    Reproducer,
    RunReport,
    Statistics,
    StepRecord,
    Timing,
    Verifier,
    read_reproducer,
    standard_instruments,
)
from uopir.passes.options import OptionInfo, format_value
from uopir.passes.pipeline import AnchorStep, PassStep, Step
from uopir.passes.registry import (
    ANCHORS,
    LOAD_ERRORS,
    PASS_MODULES,
    PASSES,
    PIPELINES,
    TEST_PASS_MODULES,
    TEST_PASSES_ENV,
    AnchorInfo,
    PassInfo,
    PipelineInfo,
    check_pass_names,
    get_pass,
    list_passes_text,
    load_passes,
    register_anchor,
    register_pass,
    register_pipeline,
)
from uopir.passes.runner import PassContext, PassManager

__all__ = ["register_pass", "register_pipeline", "register_anchor", "PassManager", "PassContext", "PassInfo",
           "PipelineInfo", "AnchorInfo", "PipelineError", "PassCrash", "PassFailure", "RunReport", "PASSES",
           "PIPELINES", "ANCHORS", "map_regions", "check_pass_names", "load_passes", "get_pass", "PASS_MODULES",
           "LOAD_ERRORS", "DUMP_HEADER", "TEST_PASS_MODULES", "TEST_PASSES_ENV", "PassInstrumentation", "PassEvent",
           "CrashEvent", "StepRecord", "IRPrinter", "Verifier", "Timing", "Statistics", "Reproducer",
           "standard_instruments", "read_reproducer", "list_passes_text", "OptionInfo", "format_value", "PassStep",
           "AnchorStep", "Step"]
