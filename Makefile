# The two commands of the README. Both create .venv themselves on a fresh machine, with the test tools and the
# optional yolo extra (ultralytics, AGPL-3.0): the smoke runs every task, yolo included.
# VENV and OUT are taken from the command line only (`make smoke OUT=/tmp/smoke`), never from the environment:
# both are common names that another tool may have exported, and a stray one must not move where the smoke
# writes or what `make clean` removes (`:=` here is overridden by the command line, not by the environment).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
OUT := runs/smoke

.PHONY: smoke test lint clean

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# --no-compile: the byte code of what is imported is written on first import, not that of every module of torch
	# and its stack (a fresh clone's install 52 s instead of 84 s, the smoke after it no slower: 464 s and 484 s)
	$(PY) -m pip install -q --no-compile -e '.[test,yolo]'  # yolo: the smoke runs it and the tests cover it
	# AdaptDL 0.2.11, the numerical reference of tests/algo/test_adamscale_oracle.py, with the three modules its
	# package imports when loaded; outside site-packages (--target), so only that test's subprocess imports it
	$(PY) -m pip install -q --no-deps --upgrade --target $(VENV)/adaptdl-ref adaptdl==0.2.11 portpicker==1.6.0 semver==3.1.2 autograd==1.9.1
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
# VENV is removed only when it is this repository's own: a path inside it, reached through no link that
# leaves it, and a virtual environment (pyvenv.cfg) or nothing; anything else stops clean, removing nothing.
clean:
	@v=$$(realpath -m -s -- '$(VENV)'); here=$$(realpath -- '$(CURDIR)'); \
	case "$$v" in "$(CURDIR)"/?*) ;; *) echo "make clean: VENV=$(VENV) is not inside this repository; nothing removed" >&2; exit 2;; esac; \
	case "$$(realpath -m -- "$$(dirname -- "$$v")")/" in "$$here"/*) ;; *) echo "make clean: VENV=$(VENV) is reached through a link out of this repository; nothing removed" >&2; exit 2;; esac; \
	if [ -e "$$v" -o -L "$$v" ] && [ ! -f "$$v/pyvenv.cfg" ]; then echo "make clean: VENV=$(VENV) is not a virtual environment (no pyvenv.cfg); nothing removed" >&2; exit 2; fi
	rm -rf -- "$$(realpath -m -s -- '$(VENV)')" .pytest_cache .ruff_cache build *.egg-info
	find . -path ./runs -prune -o -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
