"""Lesson 11's figures: the excess over the floor of each skill as your model trains, and the
copy skill's excess against the three seeds of the variant table."""

from matplotlib.figure import Figure

from course_lib.viz.style import LINE_MARKERS, LINE_STYLES, PALETTE, new_figure


def skill_curves_figure(steps, excess: dict, skills=None, bound=None) -> Figure:
    """Excess loss (nats over the floor) of each skill against the training step (lesson 11):
    `excess` maps a skill to one value per step in `steps`; `skills` picks and orders them;
    `bound`, if given, is drawn as a dashed line (the lesson's "within 0.2 nats")."""
    skills = list(excess) if skills is None else list(skills)
    missing = [s for s in skills if s not in excess or len(excess[s]) != len(steps)]
    if missing:
        raise ValueError(f"excess: expected {len(steps)} values for each of {skills}, "
                         f"got none or another count for {missing}")  # fmt: skip
    fig, ax = new_figure(7.6, 4.2)
    for i, skill in enumerate(skills):
        ax.plot(steps, excess[skill], LINE_STYLES[i % 4], marker=LINE_MARKERS[i % 6], ms=4,
                lw=1.8, color=PALETTE[i % 8], label=skill)  # fmt: skip
    ax.axhline(0, color="0.4", lw=1.0)
    ax.annotate("the floor: nothing left to learn", (steps[0], 0), xytext=(0, -13),
                textcoords="offset points", ha="left", fontsize=9, color="0.3")  # fmt: skip
    if bound is not None:
        ax.axhline(bound, color="0.4", lw=0.9, ls="--")
        ax.annotate(f"within {bound:g} nats of the floor", (steps[-1], bound), xytext=(0, 3),
                    textcoords="offset points", ha="right", fontsize=9, color="0.3")  # fmt: skip
    ax.set_ylim(bottom=min(-0.45, ax.get_ylim()[0]))
    ax.set(xlabel="training step", ylabel="excess loss (nats per prediction)")
    ax.set_title("Your model's excess over the floor, skill by skill (validation split)")
    ax.legend(fontsize=9, ncols=2)
    return fig


def copy_forming_figure(live, shipped: dict, jumps: dict) -> Figure:
    """The copy positions' excess against the step (log scale, lesson 11): `live` your run's
    [(step, excess)], `shipped` seed -> [(step, excess)] of the variant table's base runs,
    `jumps` seed -> the step that ends the largest fall."""
    fig, ax = new_figure(7.6, 4.2)
    ax.plot(*zip(*live, strict=True), "-", marker="o", ms=4, lw=2.4, color=PALETTE[7],
            label="your model (600 steps, seed 0)")  # fmt: skip
    for i, (seed, curve) in enumerate(sorted(shipped.items())):
        line = ax.plot(*zip(*curve, strict=True), LINE_STYLES[1 + i % 3], lw=1.6,
                       color=PALETTE[i], label=f"base, seed {seed} (2,000 steps)")[0]  # fmt: skip
        ax.axvline(jumps[seed], color=line.get_color(), lw=0.8, ls=":")
    ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel="excess on copy positions (nats, log scale)")
    ax.set_title("The copy skill forms in a jump (thin vertical lines: each seed's jump step)")
    ax.legend(fontsize=9)
    return fig
