"""A training package written for AI Platform Training (``python -m trainer.task``)."""
