"""Fault injection: tests that break things on purpose and prove nothing recorded is lost or duplicated."""
