# The two commands of the README. Both create .venv themselves on a fresh machine, with the test tools and the
# optional yolo extra (ultralytics, AGPL-3.0): the smoke runs every task, yolo included.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= runs/smoke

.PHONY: smoke test lint clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,yolo]'  # yolo: the smoke runs it and the tests cover it
	touch $@

smoke: $(VENV)/.installed
	$(VENV)/bin/adascale-bench smoke --out $(OUT)

test: $(VENV)/.installed
	$(PY) -m pytest -q

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

# Only what the build made: results (runs/, the README's --out runs/paper) are a user's, never a target's.
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache build *.egg-info
	find . -path ./runs -prune -o -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
