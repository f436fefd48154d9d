"""The LLM of an ``--llm`` value, as a LangChain LLM: the one loader of ``swrag eval``,
``swrag tune``, `run_eval` and ``SWRAG_RAPTOR_LLM`` (a framework face).

* ``default``: the local model (`swrag_integrations.llm.load_llama3`), as LangChain.
* ``fake:ANSWER|ANSWER``: LangChain's ``FakeListLLM`` (tests, dry runs).
* ``module:factory``: imports the **user's** module named on the command line and calls
  ``factory()`` (it runs that code); the result, or its ``as_langchain()``, must be a
  LangChain ``Runnable`` (an LLM, a chat model...). This is the package's only import of
  a module by a name given at run time, and it never names a package module.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

__all__ = ["ANSWER_TOKENS", "check_llm_spec", "load_llm"]

ANSWER_TOKENS = 64
"""New tokens of the local model's answers (``default``)."""

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def check_llm_spec(spec: str | None) -> str:
    """Check the syntax of an ``--llm`` value without importing or running anything.

    Returns:
        ``"default"``, ``"fake"`` or ``"factory"``.

    Raises:
        ValueError: not ``default``, ``fake:...`` or ``module:factory``.
    """
    spec = spec or "default"
    if spec == "default":
        return "default"
    if spec.startswith("fake:"):
        return "fake"
    module, sep, attr = spec.partition(":")
    if sep and _DOTTED.match(module) and _DOTTED.match(attr):
        return "factory"
    raise ValueError(f"--llm {spec!r}: use 'default', 'fake:ANSWER|ANSWER' or 'module:factory' "
                     "(a dotted module path, a colon and a callable in it, e.g. mypkg.llms:make_llm)")


def _call_user_factory(spec: str) -> Any:
    """Import the user's module of ``module:factory`` and return ``factory()``."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(f"--llm {spec!r}: cannot import module {module_name!r} ({exc})") from exc
    except Exception as exc:  # the module's own code failed
        raise ValueError(f"--llm {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}") from exc
    factory: Any = module
    for part in attr.split("."):
        try:
            factory = getattr(factory, part)
        except AttributeError:
            raise ValueError(f"--llm {spec!r}: module {module_name!r} has no attribute {attr!r}") from None
    if not callable(factory):
        raise TypeError(f"--llm {spec!r}: {attr!r} is a {type(factory).__name__}, not a callable factory")
    try:
        return factory()
    except Exception as exc:
        raise ValueError(f"--llm {spec!r}: {attr}() raised {type(exc).__name__}: {exc}") from exc


def load_llm(spec: str | None = "default") -> Any:
    """The LangChain LLM named by the ``--llm`` value ``spec`` (see the module).

    Raises:
        ValueError: bad syntax; the module of ``module:factory`` cannot be imported, has
            no such attribute, or importing / calling it raised.
        TypeError: the factory is not callable or did not return a LangChain ``Runnable``
            (nor an object with ``as_langchain()``).
    """
    spec = spec or "default"
    kind = check_llm_spec(spec)
    if kind == "default":
        from swrag_integrations.llm import load_llama3

        return load_llama3(max_new_tokens=ANSWER_TOKENS).as_langchain()
    if kind == "fake":
        from langchain_core.language_models.fake import FakeListLLM

        return FakeListLLM(responses=spec[5:].split("|"))
    llm = _call_user_factory(spec)
    if hasattr(llm, "as_langchain"):
        try:
            llm = llm.as_langchain()
        except Exception as exc:
            raise ValueError(f"--llm {spec!r}: as_langchain() of the factory's result raised "
                             f"{type(exc).__name__}: {exc}") from exc
    from langchain_core.runnables import Runnable

    if not isinstance(llm, Runnable):
        attr = spec.partition(":")[2]
        raise TypeError(f"--llm {spec!r}: {attr}() returned {type(llm).__name__}, not a LangChain LLM, chat model "
                        "or Runnable (nor an object with as_langchain())")
    return llm
