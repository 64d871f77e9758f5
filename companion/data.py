"""Synthetic sequences whose best achievable loss is known exactly.

A random order-``k`` Markov chain over a small vocabulary: the next token depends on the
previous ``k`` tokens only. A model that predicts the next token cannot do better, on
average, than the chain's conditional entropy, so every loss curve has an exact floor.
With ``k >= 2`` a model must find *which* earlier tokens are the last ``k``: it needs
order information, which is what the lab chapters vary.

Notation: ``V`` vocabulary size, ``k`` order, a *context* is the tuple of the last ``k``
tokens, encoded as the integer ``sum_j token_j * V ** (k - 1 - j)`` (oldest first).
"""

from __future__ import annotations

import numpy as np

from companion import _checks


def _entropy(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy in nats along ``axis``; ``0 log 0 = 0``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log(p), 0.0)
    return terms.sum(axis=axis)


class MarkovChain:
    """A random order-``k`` Markov chain over ``V`` tokens.

    Args:
        vocab_size: ``V`` (at least 2).
        order: ``k`` (at least 1), how many previous tokens the next one depends on.
        seed: seed of the random transition table.
        concentration: Dirichlet parameter of each row of the table; smaller values make
            the next token more predictable (lower entropy rate).

    Attributes:
        transitions: float64 ``(V ** k, V)``, row ``c`` is ``P(next | context c)``.
        stationary: float64 ``(V ** k,)``, the stationary distribution of contexts.
    """

    def __init__(self, vocab_size: int, order: int, seed: int, *, concentration: float = 0.5):
        self.vocab_size = _checks.positive_int("vocab_size", vocab_size)
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
        self.order = _checks.positive_int("order", order)
        if self.vocab_size**self.order > 1_000_000:
            raise ValueError(f"vocab_size ** order = {self.vocab_size ** self.order} contexts is too many; use fewer")
        self.seed = _checks.integer("seed", seed)
        concentration = _checks.real("concentration", concentration)
        if concentration <= 0:
            raise ValueError(f"concentration must be positive, got {concentration}")
        rng = np.random.default_rng(self.seed)
        num_contexts = self.vocab_size**self.order
        self.transitions = rng.dirichlet(np.full(self.vocab_size, concentration), size=num_contexts)
        self.stationary = self._stationary()

    def _next_context(self, context: np.ndarray, token: np.ndarray) -> np.ndarray:
        return (context * self.vocab_size) % (self.vocab_size**self.order) + token

    def _stationary(self) -> np.ndarray:
        """Stationary distribution of the chain on contexts, by power iteration."""
        v, n = self.vocab_size, self.vocab_size**self.order
        contexts = np.arange(n)
        p = np.full(n, 1.0 / n)
        for _ in range(10_000):
            nxt = np.zeros(n)
            for token in range(v):  # mass flowing from each context to its successor
                np.add.at(nxt, self._next_context(contexts, token), p * self.transitions[:, token])
            if np.abs(nxt - p).max() < 1e-15:
                return nxt
            p = nxt
        raise RuntimeError("the chain did not reach its stationary distribution; try another seed")

    def entropy_rate(self) -> float:
        """``H(next | last k tokens)`` under the stationary distribution, in nats per token."""
        return float(self.stationary @ _entropy(self.transitions))

    def optimal_loss_by_position(self, length: int) -> np.ndarray:
        """The best achievable mean loss for predicting token ``t`` from tokens ``0 .. t-1``.

        For sequences started from the stationary distribution. Token ``t >= k`` sees a full
        context, so its floor is :meth:`entropy_rate`; earlier tokens see fewer previous
        tokens and their floor is ``H(x_t | x_0 .. x_{t-1})``, higher.

        Returns:
            float64 ``(length - 1,)``: entry ``t - 1`` is the floor for token ``t``.
        """
        length = _checks.positive_int("length", length)
        if length < 2:
            raise ValueError(f"length must be at least 2 (one token predicts the next), got {length}")
        floors = []
        for t in range(1, length):
            if t >= self.order:
                floors.append(self.entropy_rate())
            else:
                floors.append(self._joint_entropy(t + 1) - self._joint_entropy(t))
        return np.array(floors)

    def log_loss(self, tokens) -> np.ndarray:
        """The chain's own loss on given sequences: ``-log P(x_t | x_0 .. x_{t-1})``, in nats.

        This is what the best possible predictor scores on these very tokens: its mean over
        many sequences is :meth:`optimal_loss_by_position`. Tokens ``t < k`` are predicted
        from the stationary distribution of the first tokens, as :meth:`sample` starts them.

        Args:
            tokens: integer ``(n, s)`` array (or tensor) of token ids, ``s >= 2``.

        Returns:
            float64 ``(n, s - 1)``: entry ``[i, t - 1]`` is the loss of token ``t`` of row ``i``.
        """
        tokens = np.asarray(tokens.cpu() if hasattr(tokens, "cpu") else tokens)
        if tokens.ndim != 2 or tokens.shape[1] < 2:
            raise ValueError(f"tokens must have shape (num_sequences, length >= 2), got {tokens.shape}")
        if tokens.dtype.kind not in "iu":
            raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        v, k = self.vocab_size, self.order
        if tokens.min() < 0 or tokens.max() >= v:
            raise ValueError(f"token ids must be in [0, {v}), got values in [{tokens.min()}, {tokens.max()}]")
        n, s = tokens.shape
        out = np.empty((n, s - 1))
        for t in range(1, min(k, s)):  # fewer than k previous tokens: use the stationary marginals
            first = self.stationary.reshape((v,) * k).sum(axis=tuple(range(t + 1, k)))  # P(x_0 .. x_t)
            joint = first[tuple(tokens[:, : t + 1].T)]
            out[:, t - 1] = -np.log(joint / first.sum(axis=-1)[tuple(tokens[:, :t].T)])
        if s > k:
            windows = np.lib.stride_tricks.sliding_window_view(tokens, k, axis=1)[:, : s - k]  # (n, s-k, k)
            context = windows @ (v ** np.arange(k - 1, -1, -1))
            out[:, k - 1 :] = -np.log(self.transitions[context, tokens[:, k:]])
        return out

    def _joint_entropy(self, n: int) -> float:
        """Entropy of the first ``n <= k`` tokens of a stationary sequence."""
        v, k = self.vocab_size, self.order
        marginal = self.stationary.reshape((v,) * k).sum(axis=tuple(range(n, k)))  # oldest n of a context
        return float(_entropy(marginal.ravel()))

    def sample(self, num_sequences: int, length: int, *, seed: int) -> np.ndarray:
        """Draw sequences that start in the stationary distribution.

        Returns:
            int64 ``(num_sequences, length)``.
        """
        num_sequences = _checks.positive_int("num_sequences", num_sequences)
        length = _checks.positive_int("length", length)
        rng = np.random.default_rng(_checks.integer("seed", seed))
        v, k = self.vocab_size, self.order
        context = rng.choice(v**k, size=num_sequences, p=self.stationary)
        # The first k tokens are the digits of the starting context, oldest first.
        digits = (context[:, None] // v ** np.arange(k - 1, -1, -1)) % v  # (n, k)
        out = np.empty((num_sequences, max(length, k)), dtype=np.int64)
        out[:, :k] = digits
        cumulative = np.cumsum(self.transitions, axis=1)
        cumulative[:, -1] = 1.0  # guard against rounding in the last entry
        for t in range(k, length):
            u = rng.random(num_sequences)
            token = (u[:, None] > cumulative[context]).sum(axis=1)  # inverse-CDF, one draw per row
            out[:, t] = token
            context = self._next_context(context, token)
        return out[:, :length]
