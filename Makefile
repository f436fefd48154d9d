# The two commands of the README. Each sets up .venv on a fresh machine first: `make demo`
# installs only what the demo imports, `make test` (and `make setup`) everything.
.PHONY: setup setup-demo demo test bench reports docs

setup:
	@bash scripts/setup.sh

setup-demo:
	@bash scripts/setup.sh demo

demo: setup-demo
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/swrag demo

# The main suite (unit + integration: servers, Ray, real models, notebooks, browser) in one
# pytest-xdist worker per core, each test file whole on one worker (its module fixtures, e.g.
# a loaded model, are built once); a worker that crashes fails its test and is not replaced
# (--max-worker-restart=0: a replaced worker once left xdist waiting for ever). Then the
# packaging tests (fresh venvs: the [all], [llama-index] and [ipex] environments, pip dry runs).
test: setup
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python -m pytest -q -rs --durations=25 -n auto --dist loadfile --max-worker-restart=0 -m "not packaging"
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python -m pytest -q -rs --durations=10 -m packaging

bench: setup
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/bench_splitters.py --clock cpu

# Regenerate the reports README/docs quote into runs/reports/<time>/ and mark every figure that
# moved beyond the tolerance of its kind; a missing or empty baseline fails its report
# (benchmarks/reports.py). Options through ARGS, e.g.
# make reports ARGS=--quick | ARGS=--list | ARGS="--only grounding corpus" | ARGS="--only graph --write"
reports: setup
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/reports.py $(ARGS)

# The documentation site into site/ (mkdocs.yml; a broken link, a missing reference or a docstring
# that does not render fails the build). The API reference is generated from __all__ (docs/_hooks.py).
docs: setup
	.venv/bin/python -m mkdocs build --strict
