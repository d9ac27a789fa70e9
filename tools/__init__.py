"""The course's maintenance scripts, a package: run each from the repository root as
`python -m tools.<name>` (course.py's commands do), and import them as `tools.<name>`
(tests, deploy/nbgrader_course.py), never through sys.path."""
