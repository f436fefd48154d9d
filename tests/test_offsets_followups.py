"""Follow-ups of split-then-add keeping source offsets: merged windows' ``doc_ids``,
views/traces of joined records that start past the source's first character."""

from __future__ import annotations

from swrag_integrations.retrieval import ContextSpan, assemble_context


def test_merged_windows_carry_the_union_of_their_doc_ids():
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    first = ContextSpan("s", 0, 30, text[0:30], 0.9, 1, {"doc_ids": ["s@0-20", "s@20-40"]})
    second = ContextSpan("s", 20, 56, text[20:56], 0.5, 2, {"doc_ids": ["s@20-40", "s@40-56"]})
    ctx = assemble_context([first, second], None)
    assert len(ctx.spans) == 1
    assert ctx.spans[0].metadata["doc_ids"] == ["s@0-20", "s@20-40", "s@40-56"]
