"""`make bench`: how fast the course feels. Run as `python -m benchmarks` from the repository root."""
