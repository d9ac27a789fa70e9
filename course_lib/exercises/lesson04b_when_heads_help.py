"""Lesson 04b_when_heads_help has no exercise: it reads the variant table and the shipped
one-layer models, and its explorer runs the learner's lesson 04a multihead."""

EXERCISES = ()
