# Two commands matter: `make book` and `make test`. Both create .venv on first use.
# Any Python 3.11 or newer: the first of these that PATH has (override with PYTHON=...).
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3 python; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11, 5))' 2>/dev/null \
	&& echo $$p && break; done)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NOTEBOOKS := $(sort $(wildcard book/*.ipynb))
# What `make test` runs; narrow it with e.g. `make test TESTS="book/03_formula.ipynb tests/test_sinusoidal.py"`.
TESTS  ?= tests book

.PHONY: book test bench lab execute figures constraints clean
.PHONY: site-test test-cpus serve
.PHONY: student grade lab-train lab-check doctor
.PHONY: pdf

$(STAMP): requirements.txt constraints.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "No Python 3.11.5 or newer on PATH: install one (3.11, 3.12 or 3.13), or run make PYTHON=/path/to/python3.11"; exit 1; }
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@# Build matplotlib's font cache now, so no notebook prints the one-time notice to stderr.
	MPLBACKEND=Agg $(PY) -c "import matplotlib.pyplot"
	touch $(STAMP)

book: $(STAMP)
	$(VENV)/bin/jupyter-book build . --warningiserror --nitpick --keep-going
	@echo "The book is at $(CURDIR)/_build/html/index.html"

# Training-derived numbers are printed as "≈1.60"; the sanitizer masks them (another CPU adds in
# another order and may round them differently) and the notebooks' asserts carry the claims.
test: $(STAMP)
	$(PY) -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg $(TESTS)

# Every notebook again under each narrower CPU capability this machine can run (PyTorch's
# generic kernels, AVX2, AVX-512; tests/cpu_capabilities.py lists them), as a learner's older
# CPU would run it; every run must pass. Narrow it like `make test`, with TESTS=...
CPU_TESTS ?= book
test-cpus: $(STAMP)
	@caps="$$($(PY) tests/cpu_capabilities.py)" || exit 1; \
	test -n "$$caps" || echo "test-cpus: no narrower CPU capability to try on this machine"; \
	echo "$$caps" | while read -r settings; do test -z "$$settings" && continue; \
		echo "== $$settings make test TESTS=\"$(CPU_TESTS)\""; \
		env $$settings $(MAKE) --no-print-directory test TESTS="$(CPU_TESTS)" || exit 1; \
	done

# The built website in a real browser (Debian's chromium, offline, desktop and phone widths):
# builds the book, then runs tests/test_site.py. `make test` runs that test too, on whatever
# _build/html holds, and skips it (saying why) without chromium or a built site;
# REQUIRE_BROWSER=1 turns such a skip into a failure (.ci/run sets it).
site-test: book
	$(PY) -m pytest tests/test_site.py

# Seconds per notebook, each in a fresh process and kernel (start-up included, as a newcomer
# counts), then the training step against a plain PyTorch decoder and the lab on 1 and 2 workers.
# Each row goes to _build/bench.md as it is measured; Ctrl-C stops the notebook's kernel and
# workers too. `make bench NB=book/03_formula.ipynb` times only that notebook.
bench: $(STAMP)
	$(PY) tests/notebooks.py bench $(NB)
	$(if $(filter file,$(origin NB)),$(PY) tests/speed.py step | tee -a _build/bench.md)
	$(if $(filter file,$(origin NB)),$(PY) tests/speed.py workers | tee -a _build/bench.md)

# JupyterLab on book/, or on the student edition (no solutions) with EDITION=student, which
# `make student` builds first if _build/student/notebooks is missing. PORT=8899 picks the port,
# LAB_ARGS='--no-browser' adds options; as root (Docker, Codespaces) it adds --allow-root.
# tools/jupyterlab_overrides.json turns off JupyterLab's news pop-up.
EDITION ?= book
LAB_DIR = $(if $(filter student,$(EDITION)),_build/student/notebooks,book)
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings
lab: $(STAMP)
	@case "$(EDITION)" in book|student) ;; *) echo "EDITION must be book or student, got '$(EDITION)'"; exit 2;; esac
	@test -d $(LAB_DIR) || $(MAKE) --no-print-directory student
	@mkdir -p $(LAB_SETTINGS) && cp tools/jupyterlab_overrides.json $(LAB_SETTINGS)/overrides.json
	@$(VENV)/bin/jupyter trust $(LAB_DIR)/*.ipynb >/dev/null
	$(VENV)/bin/jupyter lab $(LAB_DIR) $(if $(PORT),--port=$(PORT)) \
		$(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root) \
		--KernelManager.transport_encryption=auto $(LAB_ARGS)

# The built website over http://localhost:PORT (default 8000; EDITION=student serves the
# student edition). Search shows its results' snippets only over http, not from file://.
serve: $(STAMP)
	@dir=$(if $(filter student,$(EDITION)),_build/student/html,_build/html); \
	test -f $$dir/index.html || $(MAKE) --no-print-directory $(if $(filter student,$(EDITION)),student,book) || exit 1; \
	echo "Serving $$dir at http://127.0.0.1:$(or $(PORT),8000)/ (Ctrl-C stops it)"; \
	$(PY) -m http.server $(or $(PORT),8000) --bind 127.0.0.1 --directory $$dir

# Retrain every model chapter 12 reads (companion/lab_runs.py; about 90 minutes on two
# cores) and rewrite book/data/lab_runs/. Narrow it with LAB_ONLY='repeat--rope*' or
# LAB_SEEDS_ONLY=0,1; LAB_DEVICE=cuda trains on a GPU (then LAB_WORKERS=1).
LAB_ONLY ?= *
LAB_WORKERS ?=
lab-train: $(STAMP)
	$(PY) -m companion.lab_runs train --only '$(LAB_ONLY)' $(if $(LAB_SEEDS_ONLY),--seeds $(LAB_SEEDS_ONLY)) \
		$(if $(LAB_WORKERS),--workers $(LAB_WORKERS)) $(if $(LAB_DEVICE),--device $(LAB_DEVICE))

# Retrain seed 0 of every configuration and check it against the record (CI runs this).
lab-check: $(STAMP)
	$(PY) -m companion.lab_runs check --only '$(LAB_ONLY)' $(if $(LAB_WORKERS),--workers $(LAB_WORKERS))

# The position doctor on a local checkpoint folder or config.json (companion/doctor.py).
doctor: $(STAMP)
	@test -n "$(MODEL)" || { echo "usage: make doctor MODEL=path/to/checkpoint-or-config.json"; exit 2; }
	$(PY) -m companion.doctor "$(MODEL)"

# Re-execute notebooks in place and store their outputs: make execute NB=book/03_formula.ipynb
# A lab chapter checks its results against book/data/lab_results.json and writes them to
# _build/lab_results.json; authors rewrite the record itself with LAB_RECORD=1.
NB ?= $(NOTEBOOKS)
LAB_RECORD ?=
execute: $(STAMP)
	LAB_RECORD=$(LAB_RECORD) LAB_RESULTS_COPY=_build/lab_results.json $(PY) tests/notebooks.py execute $(NB)

# Redraw the cover figure that README.md and the landing page show (a test checks it is current).
figures: $(STAMP)
	MPLBACKEND=Agg $(PY) -c "from companion.plotting import hero_figure; hero_figure().savefig('book/images/hero.png', metadata={'Software': None})"

# Re-pin every transitive dependency from the current .venv (after changing requirements.txt).
constraints: $(STAMP)
	$(PY) -m pip freeze --exclude-editable | sed -e 's/+cpu$$//' > constraints.txt

# The student edition (INSTRUCTORS.md): the chapters without their solutions, one stub per
# exercise, in _build/student/notebooks, and the website built from them in _build/student/html.
student: $(STAMP)
	$(PY) tools/student.py --strict

# Grade one folder of notebooks per student: make grade SUBMISSIONS=DIR [GRADE_TIMEOUT=600]
# Writes _build/grades.csv (student,chapter,exercise,passed,feedback); see INSTRUCTORS.md.
# ASSIGNMENT=tools/assignments/assignment1.yml adds points, the late rule (SUBMITTED=times.csv),
# totals.csv, feedback/, written.csv (MARKS=written.csv merges hand marks), lms.csv (ROSTER=).
GRADE_TIMEOUT ?= 600
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=DIR (DIR/<student>/<chapter>.ipynb)"; exit 2; }
	GRADE_TIMEOUT=$(GRADE_TIMEOUT) $(PY) tools/grade.py "$(SUBMISSIONS)" --out _build/grades.csv \
		$(if $(GRADE_UNCONFINED),--unconfined) $(if $(ASSIGNMENT),--assignment "$(ASSIGNMENT)") \
		$(if $(SUBMITTED),--submitted "$(SUBMITTED)") $(if $(ROSTER),--roster "$(ROSTER)") \
		$(if $(MARKS),--marks "$(MARKS)")

# The whole book as one PDF, typeset by xelatex from Debian's TeX Live (tools/pdf.py lists
# the packages; about 400 MB): writes _build/pdf/book.pdf and prints its path. Sphinx
# warnings and characters missing from the fonts fail it, as warnings fail `make book`.
pdf: $(STAMP)
	$(PY) tools/pdf.py --strict

clean:
	rm -rf _build
