"""Chains: chat models and the grounded-answer pipelines built on them."""
