"""course_lib.viz.lesson06: what no lesson test covers on its own."""

from course_lib import viz


def test_every_head_detector_has_one_style():
    from course_lib import heads

    assert list(viz.DETECTOR_STYLES) == list(heads.DETECTORS)
    markers = [style["marker"] for style in viz.DETECTOR_STYLES.values()]
    assert len(set(markers)) == len(markers)  # a map's marks tell the detectors apart
