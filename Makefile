# The study in two commands:  `make study` (every notebook, figures, tables) and `make test`.
# Both set up a local virtual environment first (.venv); on a machine without an NVIDIA GPU the
# CPU build of torch is installed, never the multi-GB CUDA wheels.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
RUN ?=
PRESET ?=
TORCH_VERSION ?= 2.13.0
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
PRESET_FILE := $(if $(PRESET),presets/$(PRESET).yaml,)
SHELL := /bin/bash

# RUN names a folder under results/ and runs/, PRESET a file presets/<PRESET>.yaml: plain names, never
# paths. Checked with make's own functions (no shell sees the value before it is checked).
NAME_CHARS := a b c d e f g h i j k l m n o p q r s t u v w x y z A B C D E F G H I J K L M N O P Q R S T U V W X Y Z \
  0 1 2 3 4 5 6 7 8 9 _ - .
without_chars = $(if $(2),$(call without_chars,$(subst $(firstword $(2)),,$(1)),$(wordlist 2,$(words $(2)),$(2))),$(1))
plain_name = $(and $(filter 1,$(words $(1))),$(if $(filter .%,$(1)),,ok),$(if $(call without_chars,$(1),$(NAME_CHARS)),,ok))
ifneq ($(RUN),)
ifeq ($(call plain_name,$(RUN)),)
$(error RUN is not a plain folder name (letters, digits, '_', '-', '.'; not starting with '.'): use e.g. RUN=myrun)
endif
endif
ifneq ($(PRESET),)
ifeq ($(call plain_name,$(PRESET)),)
$(error PRESET names a file of presets/ without its folder or .yaml (letters, digits, '_', '-', '.'): e.g. PRESET=paper)
endif
endif
ifneq ($(PRESET),)
ifeq ($(wildcard $(PRESET_FILE)),)
$(error PRESET=$(PRESET): no file $(PRESET_FILE); presets: $(basename $(notdir $(wildcard presets/*.yaml))))
endif
endif

.PHONY: setup study test unit nbval lint notebooks sync benchmarks lab findings lock clean-venv

setup: $(VENV)/.installed

# Reinstalled when the package's dependencies change.
$(VENV)/.installed: pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then \
	  echo "NVIDIA GPU found: installing the CUDA build of torch $(TORCH_VERSION)"; \
	  $(BIN)/python -m pip install "torch==$(TORCH_VERSION)"; \
	else \
	  echo "no NVIDIA GPU: installing the CPU build of torch $(TORCH_VERSION)"; \
	  $(BIN)/python -m pip install --timeout 20 --retries 1 --extra-index-url $(TORCH_CPU_INDEX) "torch==$(TORCH_VERSION)"; \
	fi
	$(BIN)/python -m pip install -c constraints.txt -e '.[dev,cluster]'
	$(BIN)/python -m ipykernel install --prefix $(VENV) --name python3 >/dev/null
	touch $@

# Every notebook in order (01-08), with its defaults or a preset (make study PRESET=paper); executed
# copies go to runs/<run>/, figures to figures/, tables to results/<run>/. Without RUN each notebook
# keeps its own `run` (01-05: default; 06-07 read the committed longer run, cpu_long) or the
# preset's; RUN=name sends every notebook to results/name/.
STUDY_OUT := runs/$(or $(RUN),$(PRESET),default)
study: setup
	mkdir -p $(STUDY_OUT)
	@set -e; for nb in $(NOTEBOOKS); do \
	  echo "== $$nb"; \
	  $(BIN)/papermill --cwd . $(if $(PRESET_FILE),-f $(PRESET_FILE),) $(if $(RUN),-p run "$(RUN)",) \
	    "$$nb" "$(STUDY_OUT)/$$(basename $$nb)"; \
	done

test: lint unit nbval

# Static checks of the library, tests, scripts and notebooks (pyproject.toml's [tool.ruff]).
lint: setup
	$(BIN)/ruff check lib tests scripts benchmarks notebooks

unit: setup
	$(BIN)/python -m pytest tests/ -q

nbval: setup
	$(BIN)/python -m pytest --nbval notebooks/ -q

# Re-execute the notebooks in place with their defaults (refreshes the outputs nbval compares)
# and keep the .py:percent pairs in sync. Progress bars are left out of the stored outputs.
notebooks: setup sync
	@set -e; for nb in $(NOTEBOOKS); do \
	  echo "== $$nb"; \
	  $(BIN)/papermill --cwd notebooks $$(grep -q '^progress = ' "$${nb%.ipynb}.py" && echo -p progress False) "$$nb" "$$nb"; \
	done
	$(MAKE) sync

sync: setup
	$(BIN)/jupytext --sync notebooks/[0-9][0-9]_*.py

benchmarks: setup
	@set -e; for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b; done

# JupyterLab at the repository root (notebooks/, results/, figures/ side by side).
lab: setup
	$(BIN)/jupyter lab --notebook-dir=.

# The README's generated findings tables from the committed result files.
findings: setup
	$(BIN)/python -m eie.findings --write

# Pin the environment as it is now: every installed package's exact version into constraints.txt.
lock: setup
	{ sed -n '1,3p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -v -i -e '^torch==' -e '^eie'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

clean-venv:
	rm -rf $(VENV)
