"""Retrieval and answering methods over the index: RAPTOR, graph retrieval, grounding, context steps, the answer chain."""
