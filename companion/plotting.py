"""The book's figure style: small PNGs, titled and labelled, no fonts that differ by machine."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def use_book_style() -> None:
    """Set matplotlib defaults for the book (call once at the top of a chapter)."""
    plt.rcParams.update(
        {
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": 80,
            "savefig.dpi": 80,
            "axes.grid": False,
            "axes.titlesize": "medium",
            "image.cmap": "RdBu_r",
            "font.family": "DejaVu Sans",
        }
    )


def heatmap(values: np.ndarray, *, title: str, xlabel: str, ylabel: str, colorbar_label: str, ax=None):
    """Draw a 2-D array as an image, row 0 at the top, with a labelled colour bar.

    Returns the ``Axes``.
    """
    values = np.asarray(values)
    if values.ndim != 2:
        raise ValueError(f"values must be a 2-D array, got shape {values.shape}")
    if ax is None:
        _, ax = plt.subplots()
    limit = float(np.max(np.abs(values))) or 1.0
    image = ax.imshow(values, aspect="auto", interpolation="nearest", vmin=-limit, vmax=limit)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    return ax
