# The README's two commands. Each works on a fresh machine with only Python 3.11.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test clean

$(BIN)/coocflow: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(BIN)/coocflow

demo: $(BIN)/coocflow
	$(BIN)/coocflow run paper --out runs/paper --force

test: $(BIN)/coocflow
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

clean:
	rm -rf $(VENV) runs
