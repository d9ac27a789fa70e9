"""`make bench`: how fast the course feels. Run `python -m benchmarks` from the repository root."""
