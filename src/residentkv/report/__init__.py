"""Renderers. Every renderer reads a JSON-able result; none re-evaluates anything."""
