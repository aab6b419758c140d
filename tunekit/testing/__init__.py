"""Conformance suites that ship with tunekit, for strategies and stores of other packages."""
