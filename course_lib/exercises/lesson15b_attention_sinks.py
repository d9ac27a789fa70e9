"""Lesson 15b has no exercise of its own: it reads the course's measured table of windows and
sinks on the trained models (course_lib.sliding_window), with the mask and the rolling cache
the learner wrote in lesson 15a."""

EXERCISES = ()
