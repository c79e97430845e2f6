# Every target sets up its virtual environment on first use (tools/venv.sh), and again when
# pyproject.toml or the constraints file change. A learner needs only `make lab`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NB     ?= notebooks/[0-9]*.ipynb
# JupyterLab refuses to start as root (containers, some cloud machines) unless told to.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
# More options for JupyterLab, e.g. make lab LAB_ARGS="--port=8890 --no-browser"
LAB_ARGS ?=
NBVAL  := --nbval --nbval-current-env --nbval-cell-timeout=600 --nbval-sanitize-with tests/nbval_sanitize.cfg
# Both cores (pytest-xdist): one test file or notebook per worker, so a module's fixtures are built once
# and a notebook's cells run in order in one kernel (docs/decisions.md, "CI time"). XDIST= runs serially.
XDIST  ?= -n 2 --dist loadfile
# CI makes three fresh environments: pip skips byte-compiling them (Python compiles what it imports).
ifeq ($(CI),true)
export PIP_NO_COMPILE := 1
endif
# What each role installs (pyproject.toml's extras): a learner JupyterLab only, a teacher nbgrader
# too; the developers' and CI's environment (every target below but lab and teach) the tests too.
LEARNER_EXTRAS := lab
TEACHER_EXTRAS := lab,teach
DEV_EXTRAS     := lab,test
BOOK_EXTRAS    := $(DEV_EXTRAS),book
# Colab's stack (constraints-colab.txt) on Colab's Python (3.13) when this machine has it.
COLAB_VENV   ?= .venv-colab
COLAB_PYTHON ?= $(shell for p in python3.13 $(HOME)/.pyenv/versions/3.13*/bin/python3.13; do \
                  "$$p" -c "" 2>/dev/null && { echo "$$p"; break; }; done)

# The Pythons the workbook supports (docs/decisions.md, "Pythons"). An unsupported one is refused
# here, in one line, before a virtual environment is made; a complete $(VENV) keeps its own Python
# unless PYTHON= is given on the command line.
SUPPORTED_PYTHONS := 3.11 3.12 3.13
PYTHON_VERSION = $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
check_python = $(if $(filter $(SUPPORTED_PYTHONS),$(PYTHON_VERSION)),,$(error $(PYTHON) is \
  $(if $(PYTHON_VERSION),Python $(PYTHON_VERSION),not a Python that runs): this workbook needs Python 3.11 \
  to 3.13; pass one, e.g. make lab PYTHON=python3.12))
python_given = $(if $(filter command line,$(origin PYTHON)),1,)
# $(call venv,EXTRAS): create or update $(VENV) with the workbook and EXTRAS
venv = $(if $(and $(wildcard $(STAMP)),$(if $(python_given),,1)),,$(check_python))@PYTHON_GIVEN=$(python_given) \
  tools/venv.sh "$(VENV)" "$(PYTHON)" "$(1)"

.PHONY: lab teach test unit replay replay-colab browser chromium pythons run student classroom course bench sync \
        book book-check $(STAMP)

## make lab: JupyterLab on your own copies of the notebooks (my-notebooks/, solutions removed; a copy
##           is written only when it does not exist yet), without nbgrader
lab:
	$(call venv,$(LEARNER_EXTRAS))
	$(PY) tools/lab.py learner $(ALLOW_ROOT) $(LAB_ARGS)

## make teach: JupyterLab on the committed notebooks (notebooks/, solutions in place) with nbgrader
teach:
	$(call venv,$(TEACHER_EXTRAS))
	$(PY) tools/lab.py teacher $(ALLOW_ROOT) $(LAB_ARGS)

## make .venv/.installed: the developers' environment (the one every target below uses)
$(STAMP):
	$(call venv,$(DEV_EXTRAS))

## make test: unit tests; every notebook replayed with nbval on this stack and on Colab's (there also the
##            set-up tests and the tripwires on Keras/TensorFlow behaviour); every notebook run in
##            JupyterLab in headless Chromium; the book built and each page read in headless Chromium
##            (make book-check); an install and fast tests on every other Python here
test: unit replay book-check replay-colab browser pythons

unit: $(STAMP)
	$(PY) -m pytest -q $(XDIST) --doctest-modules src/helpers tools tests --ignore=tests/test_browser.py \
	  --ignore=tests/test_pythons.py --ignore=tests/test_book.py

## make replay: every notebook replayed with nbval, each cell run twice in a row (both runs as committed)
replay: $(STAMP)
	$(PY) -m pytest -q $(XDIST) -p tests.conftest $(NBVAL) --nbval-cells-twice $(NB)

$(COLAB_VENV)/.installed: pyproject.toml constraints-colab.txt
	@test -n "$(COLAB_PYTHON)" || echo "note: Python 3.13 not found; replaying Colab's packages on $(PYTHON)"
	@tools/venv.sh "$(COLAB_VENV)" "$(or $(COLAB_PYTHON),$(PYTHON))" test constraints-colab.txt

## make replay-colab: replay every notebook on Colab's stack (TensorFlow 2.20, Keras 3.13), then run
##                    the set-up tests and the upstream tripwires there
replay-colab: $(COLAB_VENV)/.installed
	$(COLAB_VENV)/bin/python -c "import sys, tensorflow as tf, keras; print(f'Colab stack: Python {sys.version.split()[0]}, TensorFlow {tf.__version__}, Keras {keras.__version__}')" 2>/dev/null
	$(COLAB_VENV)/bin/python -m pytest -q $(XDIST) -p tests.conftest $(NBVAL) $(NB)
	$(COLAB_VENV)/bin/python -m pytest -q $(XDIST) tests/test_runtime.py tests/test_upstream.py

## make browser: every notebook opened in JupyterLab in headless Chromium, Run All Cells, checked;
##               screenshots in build/browser/ (two workers, each its own JupyterLab and Chromium)
browser: $(STAMP) chromium
	$(PY) -m pytest -q -rs $(if $(XDIST),-n 2 --dist load) tests/test_browser.py

## make chromium: Debian's Chromium for the browser test (installed with apt-get in CI, as root;
##                elsewhere it says how to get it)
chromium: $(STAMP)
	@$(PY) tests/browser.py

## make book: the workbook as a static site in build/book/html/ (open index.html): the notebooks with their
##            committed outputs (nothing executed; solutions and hidden tests left out), a landing page and
##            docs/; warnings are errors, internal links checked offline
book:
	$(call venv,$(BOOK_EXTRAS))
	$(PY) book/make_book.py

## make book-check: make book's build, its links and what leaves out, then every page opened from file:// in
##                  headless Chromium (figures drawn, math rendered, no network); screenshots in build/book/
book-check: chromium
	$(call venv,$(BOOK_EXTRAS))
	$(PY) -m pytest -q -rs --doctest-modules book tests/test_book.py

## make pythons: every unsupported Python this machine has refused; on the newest of each other supported
##               minor version a fresh copy, make lab and fast tests (PYTHONS=all: on every one)
pythons: $(STAMP)
	PYTHONS="$(PYTHONS)" $(PY) -m pytest -q -rs tests/test_pythons.py

## make run: re-execute every notebook in place, each in a fresh kernel (regenerates committed outputs)
##           (one notebook: make run NB=notebooks/02_gradient_accumulation.ipynb; same for make replay)
run: $(STAMP)
	$(PY) tools/sync_workbook.py
	for nb in $(NB); do \
	  $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
	    --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3 "$$nb" || exit 1; \
	done

## make student: student copies (solutions removed) in build/student/: the cells nbgrader's release has
student: $(STAMP)
	$(PY) tools/make_student.py notebooks build/student

## make classroom: nbgrader's workflow on every notebook (the course as `make course` makes it, the
##                 teacher's notebook, the untouched release, the wrong answers of tests/classroom_answers),
##                 the test make unit runs too; prints autograde's time per student
classroom: $(STAMP)
	$(PY) -m pytest -q -s tests/test_hidden.py tests/test_classroom.py

## make course: an nbgrader course folder in $(COURSE) (default course/): config (course id, grading seed),
##              source (the notebooks with their hidden tests), release; prints where submissions go.
##              Run it again after pulling: it updates sources and releases, and keeps everything else
COURSE ?= course
course: $(STAMP)
	$(PY) tools/classroom.py course "$(COURSE)" --notebooks notebooks

## make bench: every benchmark, ratios against its baseline, written to build/benchmarks.txt
bench: $(STAMP)
	mkdir -p build
	for b in benchmarks/bench_*.py; do $(PY) "$$b" || exit 1; done | tee build/benchmarks.txt

## make sync: rebuild Colab badges, Colab install cells, kernelspecs and the README notebook table
sync: $(STAMP)
	$(PY) tools/sync_workbook.py
