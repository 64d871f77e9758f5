"""Companion package of *Positional Encoding, Executed*.

One concept per module: ``sinusoidal`` (the fixed table of Vaswani et al. 2017, and
tensor2tensor's variant), ``position_codes`` (the simple codes the sinusoids improve
on, and the shift test), ``learned`` (a trained table), ``embedding`` (tokens +
positions), ``attention`` (multi-head self-attention with pluggable position hooks),
``exercises`` (checkers for the chapters' exercises) and ``plotting`` (the book's
figure style).

Importing the package imports nothing heavy; import the module you need, e.g.
``from companion.sinusoidal import sinusoidal_table``.
"""

__version__ = "0.1.0"
