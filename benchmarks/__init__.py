"""Side-by-side benchmarks: ``python -m benchmarks.run`` (not part of the test run)."""
