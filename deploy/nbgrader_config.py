# nbgrader's settings for grading the course (deploy/nbgrader_course.py copies this file into
# an nbgrader course folder). The lessons already mark their exercises: `# BEGIN SOLUTION` /
# `# END SOLUTION` regions, and checker cells that assert the checker's verdict
# (tools/nbgrader_metadata.py sets the cells' nbgrader metadata).
c = get_config()  # noqa: F821 (traitlets defines it when it loads this file)

c.CourseDirectory.course_id = "transformer-course"
# c.ClearSolutions.code_stub (the learner version's stub) is not set here: deploy/nbgrader_course.py
# appends it to the copy it writes, from course_lib.exercises.stub, the one place the stub's
# text lives (nbgrader's own environment has no course_lib to import it from)
# a cell may train a model (lesson 06: about a minute on 2 cores); nbgrader's default is 30 s
c.Execute.timeout = 300
