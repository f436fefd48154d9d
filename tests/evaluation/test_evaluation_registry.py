"""The strategies of ``swrag eval`` register through a plain registry (issue 40): every
builder is a callable, the modules that register are imported in one place
(evaluation/strategies.py), and the ``--llm`` loader is one definition."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import swrag_integrations
from swrag_integrations.evaluation import langchain_llm, runner, strategies
from swrag_integrations.evaluation.pipelines import PIPELINES, EvalConfig, PipelineSpec, build_pipeline, register_pipeline
from swrag_integrations.evaluation.datasets import Source

PACKAGE_DIR = Path(swrag_integrations.__file__).parent


def _registering_modules() -> set[str]:
    """Modules of the package that call ``register_pipeline`` in their module body (a
    top-level statement, or a loop / block at top level: not inside a function)."""
    found = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_pipeline"
                   for node in ast.walk(stmt)):
                parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
                found.add(".".join(parts))
    return found


def test_every_builder_is_a_callable_not_a_module_string():
    assert PIPELINES, "the registry is empty"
    for name, spec in PIPELINES.items():
        assert callable(spec.builder), (name, spec.builder)
        assert not isinstance(spec.builder, str), name


def test_a_string_builder_is_refused_with_the_parameter_named():
    with pytest.raises(TypeError, match="PipelineSpec builder must be a Pipeline class"):
        PipelineSpec("swrag_integrations.evaluation.methods.raptor:RaptorPipeline")
    with pytest.raises(TypeError, match="register_pipeline spec must be a PipelineSpec"):
        register_pipeline("bad-spec", {"builder": object})
    with pytest.raises(ValueError, match="invalid strategy name 'Bad Name'"):
        register_pipeline("Bad Name", PipelineSpec(object))


def test_the_strategy_modules_are_the_registering_modules_imported_in_one_place():
    """Each module that registers strategies at import is listed (imported) by
    evaluation/strategies.py, and the evaluation package imports that list."""
    listed = {module.__name__ for module in strategies.STRATEGY_MODULES}
    assert _registering_modules() == listed
    init = ast.parse((PACKAGE_DIR / "evaluation" / "__init__.py").read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(init) if isinstance(node, ast.ImportFrom)
                and node.module == "swrag_integrations.evaluation" for alias in node.names}
    assert "strategies" in imported


def test_a_fresh_interpreter_sees_every_strategy_from_the_pipelines_module_alone():
    code = ("from swrag_integrations.evaluation.pipelines import PIPELINES\n"
            "print(','.join(sorted(PIPELINES)))\n")
    alone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    # the whole package in another fresh interpreter (this process's PIPELINES may hold strategies
    # other tests registered, e.g. tuned configurations)
    whole = subprocess.run([sys.executable, "-c", "import swrag_integrations.evaluation\n" + code],
                           capture_output=True, text=True, check=True, timeout=300)
    names = alone.stdout.strip().split(",")
    assert names == whole.stdout.strip().split(",")
    assert {"ffs", "rcs", "default", "langchain-ensemble", "llamaindex-window", "raptor", "hipporag"} <= set(names)


def test_a_registered_callable_builds_the_pipeline_with_the_common_arguments():
    seen = {}

    def builder(sources, config, **kwargs):
        seen.update(sources=sources, config=config, **kwargs)
        return "built"

    register_pipeline("test-registry-callable", PipelineSpec(builder, None, options={"k": 7, "extra": 1}))
    try:
        config = EvalConfig("test-registry-callable", 64)
        assert build_pipeline(config, [Source("a", "text")], budget=300) == "built"
    finally:
        del PIPELINES["test-registry-callable"]
    assert seen["k"] == 7 and seen["extra"] == 1 and seen["budget"] == 300 and seen["config"] is config


def test_one_llm_loader_for_the_runner_and_the_command_line():
    from swrag_integrations.cli import eval as eval_cli

    assert runner.load_llm is langchain_llm.load_llm
    assert eval_cli.load_llm_arg is langchain_llm.load_llm
    assert eval_cli.check_llm_spec is langchain_llm.check_llm_spec


def test_the_runner_refuses_a_factory_that_returns_no_llm():
    """``run_eval(llm=None)`` and ``load_llm`` check a user's factory as the command line does."""
    with pytest.raises(TypeError, match=r"--llm 'os:getcwd': getcwd\(\) returned str, not a LangChain LLM"):
        runner.load_llm("os:getcwd")
    with pytest.raises(ValueError, match="cannot import module 'no_such_module_xyz'"):
        runner.load_llm("no_such_module_xyz:make")


def test_fake_llm_answers_in_order():
    llm = langchain_llm.load_llm("fake:one|two")
    assert [llm.invoke("q"), llm.invoke("q")] == ["one", "two"]
