"""Root pytest hooks for the notebooks that strict nbval runs."""


def pytest_collectstart(collector):
    # stderr carries warnings and progress-bar redraws that differ by machine; stored
    # outputs stay the lesson, stdout and results are compared in full.
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)
