# The two commands of the README: `make demo` and `make test`. Both set everything up on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test setup dot lint clean

# A GPU machine whose python3 already has a CUDA build of torch, Triton and our pure-Python needs (set up by its
# owner, perhaps without network access) runs with that interpreter; everywhere else we build the venv.
HAVE_GPU_PYTHON := $(shell $(PYTHON) -c "import torch, triton, bytecode; assert torch.cuda.is_available()" \
                     >/dev/null 2>&1 && echo yes)
ifeq ($(HAVE_GPU_PYTHON),yes)
PY := $(PYTHON)
setup: dot
else
setup: $(STAMP) dot
endif

# torch==2.13.0 is pinned first because that CPU wheel lies on the machine's disk; an unpinned
# torch would download a multi-GB CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==2.13.0" || $(PY) -m pip install -q torch
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

# Graphviz's `dot` renders every picture; the Python package alone cannot.
dot:
	@command -v dot >/dev/null 2>&1 || { \
	  echo "Graphviz 'dot' not found: installing it with the OS package manager..."; \
	  if command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq >/dev/null 2>&1 || sudo apt-get update -qq >/dev/null 2>&1); \
	    (apt-get install -y -qq graphviz >/dev/null 2>&1 || sudo apt-get install -y -qq graphviz >/dev/null 2>&1); \
	  elif command -v brew >/dev/null 2>&1; then brew install graphviz; fi; \
	  command -v dot >/dev/null 2>&1 || echo "WARNING: could not install Graphviz 'dot' (install the 'graphviz' package yourself); pictures will be skipped, everything else works."; \
	}

demo: setup
	$(PY) -m minidynamo.examples.demo

test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile tests

lint: setup
	$(PY) -m ruff check minidynamo mininductor tests bench notebooks/build.py notebooks/cells

clean:
	rm -rf $(VENV) out .minicompile_cache
