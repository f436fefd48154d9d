"""Evaluation of the methods (RAPTOR, graph retrieval, grounding) for ``swrag eval``."""
