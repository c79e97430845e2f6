# Every target sets up .venv on first use (and again when pyproject.toml or constraints.txt change).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
NB     ?= notebooks/[0-9]*.ipynb
# JupyterLab refuses to start as root (containers, some cloud machines) unless told to.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root,)
NBVAL  := --nbval --nbval-current-env --nbval-cell-timeout=600 --nbval-sanitize-with tests/nbval_sanitize.cfg
# Colab's stack (constraints-colab.txt) on Colab's Python (3.13) when this machine has it.
COLAB_VENV   ?= .venv-colab
COLAB_STAMP  := $(COLAB_VENV)/.installed
COLAB_PYTHON ?= $(shell for p in python3.13 $(HOME)/.pyenv/versions/3.13*/bin/python3.13; do \
                  "$$p" -c "" 2>/dev/null && { echo "$$p"; break; }; done)

.PHONY: lab test unit replay replay-colab run student classroom course bench sync

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c constraints.txt -e ".[lab,test]"
	touch $(STAMP)

## make lab: open the workbook in JupyterLab
lab: $(STAMP)
	$(VENV)/bin/jupyter lab $(LAB_ARGS) notebooks/

## make test: unit tests, then replay every notebook with nbval, on this stack and on Colab's
##            (on Colab's stack also the set-up tests and the tripwires on Keras/TensorFlow behaviour)
test: unit replay replay-colab

unit: $(STAMP)
	$(PY) -m pytest -q --doctest-modules src/helpers tests

replay: $(STAMP)
	$(PY) -m pytest -q -p tests.conftest $(NBVAL) $(NB)

$(COLAB_STAMP): pyproject.toml constraints-colab.txt
	@test -n "$(COLAB_PYTHON)" || echo "note: Python 3.13 not found; replaying Colab's packages on $(PYTHON)"
	test -x $(COLAB_VENV)/bin/python || $(or $(COLAB_PYTHON),$(PYTHON)) -m venv $(COLAB_VENV)
	$(COLAB_VENV)/bin/python -m pip install --quiet -c constraints-colab.txt -e ".[test]"
	touch $(COLAB_STAMP)

## make replay-colab: replay every notebook on Colab's stack (TensorFlow 2.20, Keras 3.13), then run
##                    the set-up tests and the upstream tripwires there
replay-colab: $(COLAB_STAMP)
	$(COLAB_VENV)/bin/python -c "import sys, tensorflow as tf, keras; print(f'Colab stack: Python {sys.version.split()[0]}, TensorFlow {tf.__version__}, Keras {keras.__version__}')" 2>/dev/null
	$(COLAB_VENV)/bin/python -m pytest -q -p tests.conftest $(NBVAL) $(NB)
	$(COLAB_VENV)/bin/python -m pytest -q tests/test_runtime.py tests/test_upstream.py

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

## make sync: rebuild Colab badges, Colab install cells and the README notebook table from pyproject.toml
sync: $(STAMP)
	$(PY) tools/sync_workbook.py
