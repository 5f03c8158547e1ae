# Every target installs what it needs into a local virtual environment (.venv); re-running is quick because the
# install is redone only when pyproject.toml changes (the stamp file below).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-test
BENCH_STAMP := $(VENV)/.stamp-bench

.PHONY: demo test bench fuzz install clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	@PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python examples/demo.py

test: $(STAMP)
	@PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python tools/run_tests.py

# the comparison packages of `.[bench]` (tinygrad, xdsl) go in a separate step so that `make test` stays lean; if they
# cannot be installed (no network) the bench still runs and prints `skipped` for the comparisons
$(BENCH_STAMP): $(STAMP)
	@$(BIN)/python -m pip install --quiet -e '.[test,bench]' \
		|| echo "warning: could not install .[bench] (tinygrad, xdsl); their comparison figures will be skipped (rm $(BENCH_STAMP) to retry)"
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	@status=0; for f in bench/*.py; do [ -e "$$f" ] || continue; case "$${f##*/}" in _*) continue;; esac; echo "== $$f"; \
		PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python "$$f" || status=1; done; exit $$status

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
	find . -name Output -path '*lit_tests*' -type d -prune -exec rm -rf {} +

# the standing fuzz target (unit_tests/fuzz.py): random .uop mutations through uop-opt with every pipeline, random
# graphs through every pass against the reference interpreter, random Tensor programs against numpy, random programs
# through the optimized lowerings compiled by C against the interpreter; failing inputs go to fuzz-failures/. CI runs
# a short fixed-seed slice of it (unit_tests/test_fuzz_slice.py). Then the property tests (hypothesis) with their full
# example counts (UOPIR_SLOW=1: `make test` draws a fifth, unit_tests/proptest.py).
FUZZ_SECONDS ?= 300
fuzz: $(STAMP)
	@PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -W ignore unit_tests/fuzz.py --seconds $(FUZZ_SECONDS) --out fuzz-failures
	@PATH="$(CURDIR)/$(BIN):$$PATH" UOPIR_SLOW=1 $(BIN)/python -m pytest -q -m property -p no:cacheprovider unit_tests
