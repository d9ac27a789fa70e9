// The static site's explorers: each figure of class course-explorer holds its controls, a
// picture and, as JSON, every precomputed setting (see tools/static_explorers.py). A change
// of any control looks up the picture for the chosen combination. Nothing is fetched.
for (const figure of document.querySelectorAll("figure.course-explorer")) {
  const data = JSON.parse(figure.querySelector("script.course-explorer-data").textContent);
  const controls = [...figure.querySelectorAll("[data-control]")];
  const picture = figure.querySelector("img.course-picture");
  const readout = figure.querySelector(".course-readout");
  const indexOf = (control) =>
    control.type === "checkbox"
      ? JSON.parse(control.dataset.order)[control.checked ? 1 : 0]
      : Number(control.value);
  const show = () => {
    const combo = controls.map(indexOf);
    for (const control of controls) {
      if (control.type !== "range") continue;
      const text = data.labels[Number(control.dataset.control)][indexOf(control)];
      control.setAttribute("aria-valuetext", text);
      const output = figure.querySelector(`output[for="${control.id}"]`);
      if (output) output.textContent = text;
    }
    const shown = data.pictures[combo.join(",")];
    if (!shown) return;
    picture.src = "data:image/png;base64," + shown.png;
    picture.alt = shown.alt;
    readout.textContent = shown.readout;
  };
  for (const control of controls) control.addEventListener("input", show);
  for (const control of controls) control.addEventListener("change", show);
}
