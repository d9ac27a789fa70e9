"""Lesson 07b has no exercise: it measures RoPE's rounding far along a line, learned
positions, and the position variants past the trained length. Its key in LESSONS keeps the
one rule that every lesson notebook has an entry module (course_lib.mywork, the workspace)."""

EXERCISES = ()

__all__ = ["EXERCISES"]
