# colc: two commands set everything up on a fresh machine.
PYTHON ?= python3

.PHONY: help install test scale examples fuzz golden bench clean

help:  ## list targets
	@grep -E '^[a-z]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install:  ## install colc and its dependencies (colc lands on PATH)
	$(PYTHON) -m pip install --upgrade pip
	$(PYTHON) -m pip install -e ".[test,dask]"

test:  ## run the test suite (doctests included), one worker per core (pytest-xdist); not the scale checks
	$(PYTHON) -m pytest -n auto --maxprocesses 4 --dist worksteal -m "not scale" tests --doctest-modules ir compiler frontends backends colc --doctest-glob='api.md' docs -p no:cacheprovider

scale:  ## the figure checks at 32 to 128 GPUs (minutes; .ci/run runs them after the suite)
	$(PYTHON) -m pytest -n auto --maxprocesses 4 --dist worksteal -m scale tests -p no:cacheprovider

examples:  ## run every README command as written (minutes; .ci/run runs it after the tests)
	COLC_EXAMPLES=all $(PYTHON) -m pytest tests/test_readme.py -q -p no:cacheprovider

fuzz:  ## long hypothesis run over the whole pipeline (COLC_FUZZ_EXAMPLES cases per test, default 400)
	COLC_FUZZ=long $(PYTHON) -m pytest tests/test_fuzz.py -p no:cacheprovider --hypothesis-show-statistics

golden:  ## regenerate golden/ from tests/cases (review the diff!)
	$(PYTHON) -m pytest tests/test_golden.py --update-golden -q -p no:cacheprovider

bench:  ## print timing tables (run by hand)
	$(PYTHON) bench/bench_compile.py

clean:
	rm -rf build *.egg-info .pytest_cache
