# ruff: noqa: F821  (lit injects `config` and `lit_config`)
"""lit configuration for uopir.

Substitutions available in RUN lines:
  uop-opt      the uop-opt console script of the running Python environment (falls back to
               `python -m uopir.tools.uop_opt` so a fresh clone works without the script on PATH)
  uop-run      the uop-run console script, likewise
  filecheck    the Python `filecheck` program (also spelled FileCheck); FILECHECK=PATH (a lit --param or an
               environment variable) runs another one instead, e.g. LLVM's FileCheck; FILECHECK_ALSO=PATH checks
               every input with the Python filecheck AND that one (a command fails when either does): one lit run
               keeps the files valid for both tools
  %roundtrip   `uop-opt %s --print-generic | uop-opt -`: print the file generically, parse that back and print it
               pretty. Use as `// RUN: %roundtrip | filecheck %s`.
  %python      the Python running lit
Files in `Inputs/` folders are not tests. The feature `c-compiler` (for `REQUIRES:`) is set when a C compiler ($CC,
clang or cc) is installed, `multicore` when this process may use more than one core, `avx512` when the host has
64-byte vectors, `llvmlite` when llvmlite imports (the llvm backend runs), `opencl` when pyopencl is, `xdsl` when
xDSL imports (emit-mlir runs), `mlir-opt` when LLVM's mlir-opt is installed (uopir.backends.mlir.tools finds it; the
`mlir-opt` substitution is its path).
UOPIR_TEST_PASSES=1 is set, so the test-* passes are available.
"""
import atexit
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import lit.formats

config.name = "uopir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".uop"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.test_source_root
config.recursiveExpansionLimit = 10  # lets %roundtrip use %s

_repo = os.path.dirname(config.test_source_root)
_bin = os.path.dirname(sys.executable)


def _tool(name: str) -> str | None:
    cand = os.path.join(_bin, name)
    return cand if os.access(cand, os.X_OK) else shutil.which(name)


_uop_opt = _tool("uop-opt") or f'"{sys.executable}" -m uopir.tools.uop_opt'
_uop_run = _tool("uop-run") or f'"{sys.executable}" -m uopir.tools.uop_run'
# FILECHECK (a lit parameter, `lit --param FILECHECK=PATH`, or the environment variable) picks another FileCheck, such
# as LLVM's own (`FILECHECK=/usr/lib/llvm-19/bin/FileCheck`): the lit files must stay valid for the tool MLIR users run.
_want = lit_config.params.get("FILECHECK") or os.environ.get("FILECHECK")
if _want:
    _filecheck = shutil.which(_want) if os.sep not in _want else (_want if os.access(_want, os.X_OK) else None)
    if _filecheck is None:
        lit_config.fatal(f"FILECHECK={_want!r}: no such executable (give the path of a FileCheck, e.g. "
                         f"/usr/lib/llvm-19/bin/FileCheck, or unset FILECHECK for the Python filecheck)")
    lit_config.note(f"FileCheck: {_filecheck}")
else:
    _filecheck = _tool("filecheck")
_also = lit_config.params.get("FILECHECK_ALSO") or os.environ.get("FILECHECK_ALSO")
if _also:
    if _want:
        lit_config.fatal("FILECHECK and FILECHECK_ALSO: give one (FILECHECK replaces the Python filecheck, "
                         "FILECHECK_ALSO checks with both)")
    _also_path = shutil.which(_also) if os.sep not in _also else (_also if os.access(_also, os.X_OK) else None)
    if _also_path is None:
        lit_config.fatal(f"FILECHECK_ALSO={_also!r}: no such executable (give the path of a FileCheck, e.g. "
                         f"/usr/lib/llvm-19/bin/FileCheck)")
    lit_config.note(f"every check runs with the Python filecheck and {_also_path}")
if _filecheck is None:
    lit_config.fatal("filecheck not found: pip install -e '.[test]' (or run `make test`)")

# The package must be importable even when uopir is not installed (PYTHONPATH wins over nothing).
config.environment["PYTHONPATH"] = os.pathsep.join(p for p in (_repo, os.environ.get("PYTHONPATH")) if p)
config.environment["PATH"] = os.pathsep.join((_bin, os.environ.get("PATH", "")))
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
# The test-* passes (uopir.passes.testing) load only on request; the lit tests use them. A test that checks what a
# user sees without them unsets it: `env -u UOPIR_TEST_PASSES uop-opt ...`.
config.environment["UOPIR_TEST_PASSES"] = "1"

# The C backend's compiler choice and compile cache follow the user's environment.
for _var in ("CC", "UOPIR_CFLAGS", "UOPIR_CACHE_DIR", "UOPIR_DISABLE_CACHE", "XDG_CACHE_HOME", "HOME"):
    if _var in os.environ:
        config.environment[_var] = os.environ[_var]
_cc = os.environ.get("CC", "").split()
if (_cc and shutil.which(_cc[0])) or (not _cc and (shutil.which("clang") or shutil.which("cc"))):
    config.available_features.add("c-compiler")
# `multicore`: this process may run on more than one core (kernel-optimize splits kernels across cores only then).
if len(os.sched_getaffinity(0)) > 1 if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1) > 1:
    config.available_features.add("multicore")
# `avx512`: the host's vectors are 64 bytes (kernel-optimize{target=c} picks wide register tiles and packed panels).
try:
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as _f:
        if " avx512f" in _f.read():
            config.available_features.add("avx512")
except OSError:
    pass
if importlib.util.find_spec("llvmlite") is not None:  # the llvm backend runs (uop-run --backend=llvm)
    config.available_features.add("llvmlite")
# `opencl` where the opencl device runs: pyopencl is installed (the test extra brings pocl's CPU device with it) and
# the device builds a trivial kernel (uopir.backends.opencl.runtime's probe: pocl 3.0 cannot target a CPU its LLVM
# does not know). The device choice follows the user's environment, so the probe runs with it.
if "UOPIR_OPENCL_DEVICE" in os.environ:
    config.environment["UOPIR_OPENCL_DEVICE"] = os.environ["UOPIR_OPENCL_DEVICE"]
if importlib.util.find_spec("pyopencl") is not None:
    _probe = subprocess.run([sys.executable, "-c", "from uopir.backends import get_backend; b = get_backend('opencl'); "
                             "print('yes' if b.available else b.reason)"], capture_output=True, text=True,
                            env={**os.environ, **config.environment}, timeout=300)
    if _probe.stdout.strip() == "yes":
        config.available_features.add("opencl")
    else:
        lit_config.note(f"the opencl tests are unsupported here: {(_probe.stdout + _probe.stderr).strip()[-300:]}")

# `xdsl`: emit-mlir runs; `mlir-opt`: LLVM's MLIR tools are installed (Debian's mlir-19-tools), found the way the
# package finds them (tools.py, loaded by its path: the lit process does not import uopir).
if importlib.util.find_spec("xdsl") is not None:
    config.available_features.add("xdsl")
_spec = importlib.util.spec_from_file_location("_uopir_mlir_tools",
                                               os.path.join(_repo, "uopir", "backends", "mlir", "tools.py"))
_mlir_tools = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mlir_tools)
_mlir_opt = _mlir_tools.find_mlir_tool("mlir-opt")
if _mlir_opt is not None:
    config.available_features.add("mlir-opt")
if "UOPIR_MLIR_BIN" in os.environ:
    config.environment["UOPIR_MLIR_BIN"] = os.environ["UOPIR_MLIR_BIN"]

# One fork server (tools/lit_server.py) runs uop-opt, uop-run and the Python filecheck for every RUN line: uopir is
# imported once, not once per command (~0.2 s each, ~800 commands). `--param server=0` (or UOPIR_LIT_SERVER=0) runs
# each command as a process of its own, as a user's shell does.
_server_on = (lit_config.params.get("server") or os.environ.get("UOPIR_LIT_SERVER") or "1").strip().lower() not in (
    "0", "off", "false", "no")
_client = None
if _server_on and hasattr(socket, "send_fds"):
    _sock_dir = tempfile.mkdtemp(prefix="uopir-lit-")
    _sock = os.path.join(_sock_dir, "server.sock")
    _server = subprocess.Popen([sys.executable, os.path.join(_repo, "tools", "lit_server.py"), _sock],
                               env={**os.environ, **config.environment}, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, text=True)
    if _server.stdout.readline().strip() == "ready":
        _client = f'"{sys.executable}" -S -I "{os.path.join(_repo, "tools", "lit_client.py")}" "{_sock}"'
    else:
        lit_config.note("the lit server did not start; each command runs as a process of its own")

    def _stop_server(proc=_server, folder=_sock_dir) -> None:
        proc.terminate()
        proc.wait()
        shutil.rmtree(folder, ignore_errors=True)

    atexit.register(_stop_server)
if _client is not None:  # the tools' names with `_`: a substitution must not match its own result
    _uop_opt = f'{_client} uop_opt "{sys.executable}"'
    _uop_run = f'{_client} uop_run "{sys.executable}"'
    if not _want:
        _filecheck = f'{_client} file_check "{sys.executable}"'
if _also:  # tools/lit_client.py runs both (through the server when it is up, else as processes of their own)
    _both = _client or f'"{sys.executable}" -S -I "{os.path.join(_repo, "tools", "lit_client.py")}" -'
    _filecheck = f'{_both} file_check_both "{sys.executable}" "{_also_path}"'

# A bare word that is not part of a path or a longer name.
_word = r"(?<![\w/.%-]){}(?![\w.-])"
config.substitutions.append(("%roundtrip", "uop-opt %s --print-generic | uop-opt -"))
config.substitutions.append(("%python", f'"{sys.executable}"'))
config.substitutions.append((_word.format("uop-opt"), _uop_opt))
config.substitutions.append((_word.format("uop-run"), _uop_run))
config.substitutions.append((_word.format("filecheck"), _filecheck))
config.substitutions.append((_word.format("FileCheck"), _filecheck))
if _mlir_opt is not None:
    config.substitutions.append((_word.format("mlir-opt"), f'"{_mlir_opt}"'))
