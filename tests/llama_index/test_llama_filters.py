"""LlamaIndex MetadataFilters are converted in the LlamaIndex face, to and from the package's
own filter; the engine's parse_filter takes only its own kinds (issue 40)."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from swrag_integrations.engine.filters import parse_filter
from swrag_integrations.llama_index.convert import filter_from_llama_index, filter_to_llama_index, parse_llama_filter


def test_the_engine_parse_filter_names_the_face_for_llama_index_filters():
    with pytest.raises(TypeError, match="filter_from_llama_index"):
        parse_filter(MetadataFilters(filters=[MetadataFilter(key="topic", value="sea")]))


def test_llama_filters_convert_to_the_same_filter_as_the_dict():
    filters = MetadataFilters(
        filters=[MetadataFilter(key="topic", value=["sea", "farm"], operator=FilterOperator.IN),
                 MetadataFilters(filters=[MetadataFilter(key="year", value=2004, operator=FilterOperator.LTE),
                                          MetadataFilter(key="kind", value="note")],
                                 condition=FilterCondition.OR)])
    want = parse_filter({"$and": [{"topic": {"$in": ["sea", "farm"]}},
                                  {"$or": [{"year": {"$lte": 2004}}, {"kind": {"$eq": "note"}}]}]})
    assert filter_from_llama_index(filters) == want
    assert parse_llama_filter(filters) == want
    assert parse_llama_filter({"topic": "sea"}) == parse_filter({"topic": "sea"})
    assert parse_llama_filter(None) is None
    assert filter_from_llama_index(filter_to_llama_index(want)) == want


def test_unsupported_llama_operators_are_refused_by_name():
    filters = MetadataFilters(filters=[MetadataFilter(key="title", value="sea", operator=FilterOperator.TEXT_MATCH)])
    with pytest.raises(ValueError, match="text_match"):
        parse_llama_filter(filters)
