"""Lesson 02's exercises (being rewritten on the declarative core)."""

EXERCISES = ()
