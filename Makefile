# The two commands of the README. Each sets up .venv on a fresh machine first.
.PHONY: setup demo test bench

setup:
	@bash scripts/setup.sh

demo: setup
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/swrag demo

test: setup
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python -m pytest -q -rs --durations=25

bench: setup
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/bench_splitters.py --clock cpu
