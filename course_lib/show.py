"""Numbers for a lesson to print that read the same on every CPU (all lessons), and the line
that sets a learner's prediction beside the measurement (the predict-then-measure cells).

Another CPU, another thread count or another build of torch rounds differently, so a float32
difference of 6e-08 on one machine is 1.2e-07 on the next. What a lesson claims about such a
number is a bound ("agrees with torch to rounding"), and that is what it should print: the
bound when it holds, and the value itself with a warning when it does not, so that strict
nbval (and a learner) sees the claim fail instead of reading a digit that rounding flipped.
"""

import math


def _number(x: float) -> str:
    """1e-06 -> '1e-6', 0.67 -> '0.67': short, for bounds written by hand."""
    if x != 0 and (abs(x) < 1e-3 or abs(x) >= 1e4):
        mantissa, exponent = f"{x:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{x:.3g}"


def bounded(value, *, below=None, above=None) -> str:
    """'below 1e-6', 'above 0.5' or 'between 0.67 and 1.08' when value keeps its bounds.

    Otherwise the value itself, marked, e.g. '3.2e-05 (expected below 1e-6)'.
    """
    if below is None and above is None:
        raise TypeError("bounded: expected at least one of below=, above=")
    if hasattr(value, "detach"):  # a torch scalar, perhaps one that carries a gradient
        value = value.detach()
    value = float(value)
    low_ok = above is None or value > above
    high_ok = below is None or value < below
    if math.isfinite(value) and low_ok and high_ok:
        if above is None:
            return f"below {_number(below)}"
        if below is None:
            return f"above {_number(above)}"
        return f"between {_number(above)} and {_number(below)}"
    wanted = " and ".join(
        part
        for part in (
            None if above is None else f"above {_number(above)}",
            None if below is None else f"below {_number(below)}",
        )
        if part
    )
    return f"{value:.2g} (expected {wanted})"


def judge_prediction(
    predicted, measured: float, *, what: str, unit: str = "", digits: int = 2
) -> str:
    """One line comparing a prediction with the measurement: how far off it was, or, with no
    prediction written (None), the measurement and a nudge to predict next time (lessons
    00_start_here, 01a_language_and_tokens, 01b_loss_and_floor and
    05_encoder_decoder)."""
    shown = f"{measured:.{digits}f}{unit}"
    if predicted is None:
        return (
            f"Measured {what}: {shown}. You wrote no prediction: write yours in the cell "
            "above and run the two cells again to see how far off it was."
        )
    if isinstance(predicted, bool) or not isinstance(predicted, int | float):
        raise TypeError(f"predicted: expected a number or None, got {type(predicted).__name__}")
    off = measured - predicted
    return (
        f"Measured {what}: {shown}; you predicted {predicted:.{digits}f}{unit}, "
        f"{abs(off):.{digits}f}{unit} {'under' if off > 0 else 'over'} the measurement."
    )


def judge_choice(predicted, measured: str, *, what: str, options=None) -> str:
    """One line setting a predicted choice (a string, or None when none was written) beside
    the measured one: right, or what it was instead; with `options` (the choices offered), a
    prediction that is none of them is told so (lesson 07b)."""
    if predicted is None:
        return (
            f"Measured {what}: {measured}. You wrote no prediction: write yours in the cell "
            "above and run the two cells again to see whether you were right."
        )
    if not isinstance(predicted, str):
        raise TypeError(f"predicted: expected a string or None, got {type(predicted).__name__}")
    said = predicted.strip().lower()
    if options is not None and said not in {o.lower() for o in options}:
        offered = ", ".join(f'"{o}"' for o in options)
        return (
            f"Measured {what}: {measured}. You wrote {predicted!r}, which is none of the "
            f"choices ({offered}): write one of them in the cell above and run the two "
            "cells again."
        )
    if said == measured.lower():
        return f"Measured {what}: {measured}; you predicted {predicted}: right."
    return f"Measured {what}: {measured}; you predicted {predicted}, which it was not."
