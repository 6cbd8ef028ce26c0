"""Datasets, pipelines and evaluators built with bad input named."""
