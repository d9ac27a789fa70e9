"""Lesson 06's exercises (being rewritten on the declarative core)."""

EXERCISES = ()
