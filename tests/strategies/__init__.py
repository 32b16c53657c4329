"""Hypothesis strategies shared by the property tests."""
