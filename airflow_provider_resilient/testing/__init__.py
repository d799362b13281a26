"""Test and offline-demo support: local stand-ins for Google Cloud services.

Nothing here is imported by the operators; it is for tests, the demo and users' own offline runs.
"""
