# nbgrader's settings for grading the course (deploy/nbgrader_course.py copies this file into
# an nbgrader course folder). The lessons already mark their exercises: `# BEGIN SOLUTION` /
# `# END SOLUTION` regions, and checker cells that assert the checker's verdict
# (tools/nbgrader_metadata.py sets the cells' nbgrader metadata).
c = get_config()  # noqa: F821 (traitlets defines it when it loads this file)

c.CourseDirectory.course_id = "transformer-course"
# the learner version's stub, as in `make workspace`: the checker then says "not implemented yet"
c.ClearSolutions.code_stub = {
    "python": '# YOUR CODE HERE\nraise NotImplementedError("Exercise: write your code here")'
}
# a cell may train a model (lesson 06: about a minute on 2 cores); nbgrader's default is 30 s
c.Execute.timeout = 300
