"""The book's figure style: small, sharp PNGs, titled and labelled, no fonts that differ
by machine."""

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
    _sharp_inline_figures()


def _sharp_inline_figures() -> None:
    """In a notebook, draw figures at twice the pixels (sharp on high-DPI screens, same
    size).

    The stored ``<Figure size ...>`` text does not change, only the PNG's resolution.
    """
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # not in IPython: nothing to set
        return
    if get_ipython() is not None:
        set_matplotlib_formats("retina")


def heatmap(
    values: np.ndarray,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    colorbar_label: str,
    ax=None,
):
    """Draw a 2-D array as an image, row 0 at the top, with a labelled colour bar.

    Returns the ``Axes``.
    """
    values = np.asarray(values)
    if values.ndim != 2:
        raise ValueError(f"values must be a 2-D array, got shape {values.shape}")
    if ax is None:
        _, ax = plt.subplots()
    limit = float(np.max(np.abs(values))) or 1.0
    image = ax.imshow(
        values, aspect="auto", interpolation="nearest", vmin=-limit, vmax=limit
    )
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    return ax


def hero_figure():
    """The book's cover figure: the sinusoidal table and three of its features.

    Returns the ``Figure`` (the README and the landing page show it as
    ``book/images/hero.png``).
    """
    from companion.sinusoidal import sinusoidal_table

    use_book_style()
    table = sinusoidal_table(100, 64)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.6), width_ratios=(1.2, 1))
    heatmap(table, title="Sinusoidal position table (d = 64)", xlabel="feature index",
            ylabel="position (tokens)", colorbar_label="value", ax=left)
    for feature in (4, 14, 30):
        right.plot(table[:, feature], label=f"feature {feature}")
    right.set(
        title="Each feature is a wave of its own frequency",
        xlabel="position (tokens)",
        ylabel="value",
        ylim=(-1.1, 1.5),
    )
    right.legend(loc="upper right", ncols=3, fontsize="small")
    fig.tight_layout()
    return fig
