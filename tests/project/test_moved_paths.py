"""The module paths from before the rooms (0.3) still import: the same module object as the
new path, with one DeprecationWarning naming the new path (swrag_integrations/_moved.py)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from swrag_integrations import _moved


def _import_old(old: str):
    """Import ``old`` afresh (its alias entry dropped first) and return (module, warnings)."""
    for name in [n for n in sys.modules if n == old or n.startswith(old + ".") and n in _moved.MOVED]:
        sys.modules.pop(name)
    sys.modules.pop(_moved.RETRIEVAL, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    return module, [w for w in caught if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize("old,new", [
    ("swrag_integrations.retrieval.index", "swrag_integrations.langchain.index"),
    ("swrag_integrations.retrieval.engine", "swrag_integrations.engine.engine"),
    ("swrag_integrations.retrieval.bm25_tantivy", "swrag_integrations.keyword.tantivy"),
    ("swrag_integrations.windows", "swrag_integrations.core.windows"),
    ("swrag_integrations.raptor", "swrag_integrations.methods.raptor"),
    ("swrag_integrations.graph.cli", "swrag_integrations.cli.graph"),
    ("swrag_integrations.evaluation.anchors", "swrag_integrations.evaluation.peers.anchors"),
])
def test_old_path_is_the_new_module_with_one_warning(old, new):
    module, caught = _import_old(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new  # the module keeps its own spec
    assert [str(w.message) for w in caught if old in str(w.message)] == [
        f"{old} moved to {new}; the old path will be removed in 0.4"]


def test_every_table_entry_resolves_to_an_existing_module():
    for old, new in _moved.MOVED.items():
        assert importlib.util.find_spec(new) is not None, (old, new)
    for name, module in _moved.RETRIEVAL_NAMES.items():
        assert module.startswith("swrag_integrations.") and module in _moved.MOVED.values(), name


@pytest.mark.parametrize("package,name,new", [
    ("swrag_integrations.retrieval", "assemble_context", "swrag_integrations.engine.assemble"),
    ("swrag_integrations.retrieval", "BM25Index", "swrag_integrations.keyword.bm25"),
    ("swrag_integrations.raptor", "RaptorIndex", "swrag_integrations.methods.raptor.store"),
    ("swrag_integrations.grounding", "ground_answer", "swrag_integrations.methods.grounding.align"),
    ("swrag_integrations.context", "RelevantSegmentExtractor", "swrag_integrations.methods.context.rse"),
])
def test_old_package_names_keep_working_with_the_warning(package, name, new):
    module, caught = _import_old(package)
    with warnings.catch_warnings(record=True) as more:
        warnings.simplefilter("always")
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(new), name)
    assert len([w for w in caught + more if issubclass(w.category, DeprecationWarning)]) == 1


def test_old_retrieval_package_lists_its_names_and_refuses_others():
    module, _ = _import_old("swrag_integrations.retrieval")
    assert "SlidingWindowIndex" in module.__all__ and "IndexEngine" in dir(module)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        module.nope


def test_fresh_interpreter_old_path_imports_no_framework_until_asked():
    code = ("import sys, warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "import swrag_integrations\n"
            "assert not [m for m in sys.modules if m.startswith(('langchain', 'llama_index'))]\n"
            "try:\n    import swrag_integrations.windows\nexcept DeprecationWarning as w:\n    print(w)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("swrag_integrations.windows moved to swrag_integrations.core.windows; "
                                  "the old path will be removed in 0.4")
