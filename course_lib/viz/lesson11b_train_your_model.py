"""Lesson 11b's figures: the learning-rate schedule, the excess over the floor of each skill as
your model trains, and the copy skill's excess against the three seeds of the variant table."""

from matplotlib.figure import Figure

from course_lib.viz.style import BLUE, GREEN, ORANGE, PURPLE, VERMILLION, new_figure

# each skill's look in lesson 11b's figures: colour, dash pattern, marker; the three skills of
# the lesson's prediction drawn solid and thick, the other three dashed and thin
SKILL_LOOKS = {
    "subject": (BLUE, "-", "o", 2.2),
    "induction": (VERMILLION, "-", "s", 2.2),
    "object": (GREEN, "-", "^", 2.2),
    "song": (ORANGE, "--", "D", 1.3),
    "bracket": (PURPLE, "--", "v", 1.3),
    "mark": ("0.25", ":", "P", 1.6),
}
SEED_COLOURS = (BLUE, ORANGE, GREEN)


def schedule_figure(schedule, runs: dict) -> Figure:
    """The learning rate of every step (lesson 11b): `schedule(step, config)` gives it, `runs`
    maps a label to a TrainConfig; the warm-up's end and the floor (a tenth of the peak) are
    marked."""
    fig, ax = new_figure(7.6, 3.4)
    for (label, config), colour, style in zip(runs.items(), (BLUE, VERMILLION), ("-", "--"),
                                              strict=False):  # fmt: skip
        steps = range(config.steps)
        ax.plot(steps, [schedule(s, config) for s in steps], style, lw=2, color=colour,
                label=label)  # fmt: skip
    first = next(iter(runs.values()))
    ax.axvline(first.warmup_steps, color="0.4", lw=0.9, ls=":")
    # under the floor's line, where no curve runs after the warm-up
    ax.annotate(f"warm-up ends (step {first.warmup_steps})", (first.warmup_steps, 0),
                xytext=(4, 3), textcoords="offset points", fontsize=9, color="0.3")  # fmt: skip
    ax.axhline(first.lr / 10, color="0.4", lw=0.9, ls=":")
    ax.annotate("a tenth of the peak: where the cosine ends", (max(c.steps for c in
                runs.values()), first.lr / 10), xytext=(0, 4), textcoords="offset points",
                ha="right", fontsize=9, color="0.3")  # fmt: skip
    ax.set_ylim(0, first.lr * 1.1)
    ax.set(xlabel="step", ylabel="learning rate")
    ax.set_title("The schedule: a straight warm-up, then half a cosine", fontsize=11)
    ax.legend(fontsize=9, loc="upper right", bbox_to_anchor=(1.0, 0.85))
    return fig


def skill_curves_figure(steps, excess: dict, skills=None, bound=None) -> Figure:
    """Excess loss (nats over the floor) of each skill against the training step (lesson 11b):
    `excess` maps a skill to one value per step in `steps`; `skills` picks and orders them;
    `bound`, if given, is drawn as a dashed line (the lesson's "within 0.2 nats"). The axis is
    linear up to 0.1 nats and logarithmic above, so that both the start (several nats) and the
    bound's neighbourhood can be read."""
    skills = list(excess) if skills is None else list(skills)
    missing = [s for s in skills if s not in excess or len(excess[s]) != len(steps)]
    if missing:
        raise ValueError(f"excess: expected {len(steps)} values for each of {skills}, "
                         f"got none or another count for {missing}")  # fmt: skip
    fig, ax = new_figure(8.4, 4.8)
    for skill in skills:
        colour, style, marker, width = SKILL_LOOKS.get(skill, ("0.5", "-.", "x", 1.3))
        ax.plot(steps, excess[skill], style, marker=marker, ms=5, lw=width, color=colour,
                label=skill)  # fmt: skip
    ax.set_yscale("symlog", linthresh=0.1, linscale=0.6)
    ax.axhline(0, color="0.4", lw=1.0)
    ax.annotate("the floor: nothing left to learn", (steps[0], 0), xytext=(2, -12),
                textcoords="offset points", ha="left", fontsize=9, color="0.3")  # fmt: skip
    if bound is not None:
        ax.axhline(bound, color="0.2", lw=1.0, ls="--")
        ax.annotate(f"{bound:g} nats above the floor", (steps[-1], bound), xytext=(0, 3),
                    textcoords="offset points", ha="right", fontsize=9, color="0.2")  # fmt: skip
    top = max(max(v) for v in excess.values())
    ticks = [t for t in (0, 0.1, 0.2, 0.5, 1, 2, 5) if t <= top * 1.2]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_ylim(min(-0.06, min(min(v) for v in excess.values()) - 0.01), top * 1.3)
    ax.set(xlabel="training step (0: the random start)",
           ylabel="excess loss (nats per prediction)\nlinear below 0.1, log above")  # fmt: skip
    ax.set_title("Your model's excess over the floor, skill by skill (validation split)",
                 fontsize=11)  # fmt: skip
    ax.legend(fontsize=9, ncols=2, loc="upper right")
    return fig


def copy_forming_figure(live, shipped: dict, bound: float = 0.2) -> Figure:
    """The copy positions' excess against the step (log scale, lesson 11b): `live` your run's
    [(step, excess)], `shipped` seed -> [(step, excess)] of the variant table's base runs. A
    dashed line marks `bound`; a circle marks each curve's first step below it, and the legend
    names that step."""
    fig, ax = new_figure(8.4, 4.6)
    # each seed its own line style as well as its colour: told apart in every colour vision
    curves = [(f"base, seed {seed} (2,000 steps)", curve, SEED_COLOURS[i % 3],
               ("-", "-.", ":")[i % 3], 1.8, None)
              for i, (seed, curve) in enumerate(sorted(shipped.items()))]  # fmt: skip
    curves.append(("your model (600 steps; seed 0's start and batches)", live, "black", "--",
                   1.6, "o"))  # fmt: skip
    for label, curve, colour, style, width, marker in curves:
        steps, values = zip(*[(s, e) for s, e in curve if s > 0], strict=True)
        crossed = next(((s, e) for s, e in zip(steps, values, strict=True) if e < bound), None)
        said = "" if crossed is None else f": within {bound:g} from step {crossed[0]}"
        ax.plot(steps, values, style, lw=width, color=colour, marker=marker, ms=4,
                label=label + said)  # fmt: skip
        if crossed is not None:
            ax.plot(*crossed, marker="o", ms=11, mfc="none", mec=colour, mew=2)
    ax.axhline(bound, color="0.3", lw=1.0, ls="--")
    last = max(s for curve in [live, *shipped.values()] for s, _ in curve)
    ax.annotate(f"{bound:g} nats above the floor", (last, bound), xytext=(0, 3),
                textcoords="offset points", ha="right", fontsize=9, color="0.3")  # fmt: skip
    ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel="excess on the copy positions (nats, log scale)")
    ax.set_title(f"The copy skill's excess (circles: the first step within {bound:g} nats)",
                 fontsize=11)  # fmt: skip
    ax.legend(fontsize=9, loc="upper right")
    return fig
