# The two commands of the README: `make demo` (install + main job) and `make test` (install + tests).
PY := .venv/bin/python

.PHONY: install demo test test-unit test-min-torch lint clean

install:
	bash scripts/install.sh

demo: install
	$(PY) tools/demo.py

test: install  # two pytest workers (the machines have 2 cores; a file's tests share one worker and its fixtures)
	$(PY) -m pytest -q -n 2 --dist loadfile
	$(PY) -m ruff check .

test-unit:  # the in-process tests only (pytest -m unit; `make test` runs them and the integration runs)
	$(PY) -m pytest -q -m unit

test-min-torch:  # the pure core on torch 2.11 + Triton 3.6 (the GPU machine's stack), no OpenMMLab: .venv-torch2.11
	bash scripts/test_min_torch.sh

lint:
	$(PY) -m ruff check .

clean:
	rm -rf work_dirs .pytest_cache .ruff_cache
