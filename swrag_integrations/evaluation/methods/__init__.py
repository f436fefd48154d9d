"""Evaluation of the methods (RAPTOR, graph retrieval, grounding) and the learned
fusion lever (its strategy and the script that fits it) for ``swrag eval``."""
