# The README's two commands. Each works on a fresh machine with only Python 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test browser clean

# What running needs (make demo), and that plus the test extras (make test): one stamp each,
# so `make demo` never installs Ray, Selenium or Jupyter. uv installs the same releases pip would
# (PyPI's newest that pyproject.toml allows) in 15 s instead of pip's 53 s, measured from an empty
# cache on 2 cores (docs/development.md). Every installed module is compiled to bytecode at install
# (--compile-bytecode), and `make test` compiles the project's own sources: where
# PYTHONDONTWRITEBYTECODE is set (as on this project's CI machines) Python would otherwise compile
# JAX, SciPy and matplotlib from source in every new process, 6 s of the 10.4 s that a `coocflow
# verify` refusing at once took (5.0 s with bytecode; `import jax` 3.9 s -> 2.0 s).
$(VENV)/.installed-run: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]'
	touch $(VENV)/.installed-run $@

# The paper as stated, then Figure 1 as printed (the setting with W 100x smaller, by the flow,
# which resolves the I2/I3 rise of Phase 1 in seconds), and which is which.
demo: $(VENV)/.installed-run
	$(BIN)/coocflow run paper --out runs/paper --force
	$(BIN)/coocflow report runs/paper
	$(BIN)/coocflow run paper-phenomena --set train.method=flow --out runs/figure1 --force
	@echo "runs/figure1/figure1.png: Figure 1 as printed (W 100x smaller, the gradient flow): the I2/I3 losses rise in Phase 1"
	@echo "runs/paper/figure1.png:   the paper's configuration as stated: no such rise (docs/findings.md, 'paper and paper-phenomena')"

test: $(VENV)/.installed-test browser
	$(BIN)/python -m compileall -q src examples >/dev/null
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25 -m 'not doc_runs'

# Headless Chromium for the report's browser test (Debian's packages); the test says why it
# skips when no browser could be installed.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1 || \
	   (apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null 2>&1)) || \
	  echo "chromium could not be installed: the browser test will skip"

clean:
	rm -rf $(VENV) runs
