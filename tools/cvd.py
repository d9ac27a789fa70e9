"""See a picture as a reader with deuteranopia would: `python -m tools.cvd IN.png [OUT.png]`.

Writes the original and its simulation side by side (OUT defaults to IN with -deuteranopia).
The simulation is Machado, Oliveira and Fernandes (2009), severity 1.0, applied to linear RGB:
red and green collapse towards one another, blue and yellow stay apart. Use it to check that
no picture of the course carries its meaning by a red/green difference alone.
"""

import sys
from pathlib import Path

import numpy as np
from PIL import Image

DEUTERANOPIA = np.array(
    [
        [0.367322, 0.860646, -0.227968],
        [0.280085, 0.672501, 0.047413],
        [-0.011820, 0.042940, 0.968881],
    ]
)


def _to_linear(srgb: np.ndarray) -> np.ndarray:
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _to_srgb(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, linear * 12.92, 1.055 * linear ** (1 / 2.4) - 0.055)


def simulate(rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 sRGB -> the same picture as seen with deuteranopia."""
    linear = _to_linear(rgb[..., :3].astype(float) / 255.0)
    seen = _to_srgb(linear @ DEUTERANOPIA.T)
    return (seen * 255.0 + 0.5).astype(np.uint8)


def side_by_side(path: Path, out: Path) -> Path:
    rgb = np.asarray(Image.open(path).convert("RGB"))
    Image.fromarray(np.concatenate([rgb, simulate(rgb)], axis=1)).save(out)
    return out


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    source = Path(sys.argv[1])
    target = (
        Path(sys.argv[2]) if len(sys.argv) == 3 else source.with_stem(f"{source.stem}-deuteranopia")
    )
    print(side_by_side(source, target))
