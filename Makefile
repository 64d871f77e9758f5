# Two commands matter: `make book` and `make test`. Both create .venv on first use.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
# What `make test` runs; narrow it with e.g. `make test TESTS="book/03_formula.ipynb tests/test_sinusoidal.py"`.
TESTS  ?= tests book

.PHONY: book test bench lab execute figures constraints clean

$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@# Build matplotlib's font cache now, so no notebook prints the one-time notice to stderr.
	MPLBACKEND=Agg $(PY) -c "import matplotlib.pyplot"
	touch $(STAMP)

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

test: $(STAMP)
	$(PY) -m pytest --nbval --nbval-current-env $(TESTS)

bench: $(STAMP)
	$(PY) tests/notebooks.py bench $(NOTEBOOKS)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab book/

# Re-execute notebooks in place and store their outputs (authors only): make execute NB=book/03_formula.ipynb
NB ?= $(NOTEBOOKS)
execute: $(STAMP)
	$(PY) tests/notebooks.py execute $(NB)

# Redraw the cover figure that README.md and the landing page show (a test checks it is current).
figures: $(STAMP)
	MPLBACKEND=Agg $(PY) -c "from companion.plotting import hero_figure; hero_figure().savefig('book/images/hero.png', metadata={'Software': None})"

# Re-pin every transitive dependency from the current .venv (after changing requirements.txt).
constraints: $(STAMP)
	$(PY) -m pip freeze --exclude-editable | sed -e 's/+cpu$$//' > constraints.txt

clean:
	rm -rf _build
