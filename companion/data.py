"""Synthetic sequences whose best achievable loss is known exactly.

Three sources, with one interface (``vocab_size``, ``seed``, ``sample``, ``log_loss``,
``optimal_loss_by_position``, ``entropy_rate``):

- :class:`MarkovChain`, local: the next token depends on the last ``k`` tokens only;
- :class:`HiddenStateChain`, where context pays: a hidden topic that switches rarely;
- :class:`RepeatedSegment`, retrieval: a random segment, then copies of it.

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

    def __init__(
        self, vocab_size: int, order: int, seed: int, *, concentration: float = 0.5
    ):
        self.vocab_size = _checks.positive_int("vocab_size", vocab_size)
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
        self.order = _checks.positive_int("order", order)
        if self.vocab_size**self.order > 1_000_000:
            raise ValueError(
                f"vocab_size ** order = {self.vocab_size**self.order} contexts is too "
                "many; use fewer"
            )
        self.seed = _checks.integer("seed", seed)
        concentration = _checks.real("concentration", concentration)
        if concentration <= 0:
            raise ValueError(f"concentration must be positive, got {concentration}")
        rng = np.random.default_rng(self.seed)
        num_contexts = self.vocab_size**self.order
        self.transitions = rng.dirichlet(
            np.full(self.vocab_size, concentration), size=num_contexts
        )
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
                np.add.at(
                    nxt,
                    self._next_context(contexts, token),
                    p * self.transitions[:, token],
                )
            if np.abs(nxt - p).max() < 1e-15:
                return nxt
            p = nxt
        raise RuntimeError(
            "the chain did not reach its stationary distribution; try another seed"
        )

    def entropy_rate(self) -> float:
        """``H(next | last k tokens)`` under the stationary distribution, in nats per
        token."""
        return float(self.stationary @ _entropy(self.transitions))

    def optimal_loss_by_position(self, length: int) -> np.ndarray:
        """The best achievable mean loss for predicting token ``t`` from tokens
        ``0 .. t-1``.

        For sequences started from the stationary distribution. Token ``t >= k`` sees a
        full context, so its floor is :meth:`entropy_rate`; earlier tokens see fewer
        previous tokens and their floor is ``H(x_t | x_0 .. x_{t-1})``, higher.

        Returns:
            float64 ``(length - 1,)``: entry ``t - 1`` is the floor for token ``t``.
        """
        length = _checks.positive_int("length", length)
        if length < 2:
            raise ValueError(
                f"length must be at least 2 (one token predicts the next), got {length}"
            )
        floors = []
        for t in range(1, length):
            if t >= self.order:
                floors.append(self.entropy_rate())
            else:
                floors.append(self._joint_entropy(t + 1) - self._joint_entropy(t))
        return np.array(floors)

    def log_loss(self, tokens) -> np.ndarray:
        """The chain's own loss on given sequences: ``-log P(x_t | x_0 .. x_{t-1})``, in
        nats.

        This is what the best possible predictor scores on these very tokens: its mean
        over many sequences is :meth:`optimal_loss_by_position`. Tokens ``t < k`` are
        predicted from the stationary distribution of the first tokens, as
        :meth:`sample` starts them.

        Args:
            tokens: integer ``(n, s)`` array (or tensor) of token ids, ``s >= 2``.

        Returns:
            float64 ``(n, s - 1)``: entry ``[i, t - 1]`` is the loss of token ``t`` of
            row ``i``.
        """
        tokens = _token_array(tokens, self.vocab_size)
        v, k = self.vocab_size, self.order
        n, s = tokens.shape
        out = np.empty((n, s - 1))
        # fewer than k previous tokens: use the stationary marginals
        for t in range(1, min(k, s)):
            # P(x_0 .. x_t)
            first = self.stationary.reshape((v,) * k).sum(axis=tuple(range(t + 1, k)))
            joint = first[tuple(tokens[:, : t + 1].T)]
            out[:, t - 1] = -np.log(joint / first.sum(axis=-1)[tuple(tokens[:, :t].T)])
        if s > k:
            # (n, s-k, k)
            windows = np.lib.stride_tricks.sliding_window_view(tokens, k, axis=1)[
                :, : s - k
            ]
            context = windows @ (v ** np.arange(k - 1, -1, -1))
            out[:, k - 1 :] = -np.log(self.transitions[context, tokens[:, k:]])
        return out

    def _joint_entropy(self, n: int) -> float:
        """Entropy of the first ``n <= k`` tokens of a stationary sequence."""
        v, k = self.vocab_size, self.order
        # oldest n of a context
        marginal = self.stationary.reshape((v,) * k).sum(axis=tuple(range(n, k)))
        return float(_entropy(marginal.ravel()))

    def sample(self, num_sequences: int, length: int, *, seed: int) -> np.ndarray:
        """Draw sequences that start in the stationary distribution.

        Returns:
            int64 ``(num_sequences, length)``.
        """
        num_sequences, length, rng = _sample_args(num_sequences, length, seed)
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
            # inverse-CDF, one draw per row
            token = (u[:, None] > cumulative[context]).sum(axis=1)
            out[:, t] = token
            context = self._next_context(context, token)
        return out[:, :length]


def _draw(cumulative: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws: row ``i`` of ``cumulative`` (n, V) with the uniform
    ``u[i]``."""
    return (u[:, None] > cumulative).sum(axis=1)


def _mean_by_position(source, length: int, num_sequences: int, seed: int) -> np.ndarray:
    """Mean of ``source.log_loss`` over sampled sequences: a Monte Carlo floor by
    position."""
    length = _checks.positive_int("length", length)
    if length < 2:
        raise ValueError(
            f"length must be at least 2 (one token predicts the next), got {length}"
        )
    num_sequences = _checks.positive_int("num_sequences", num_sequences)
    return source.log_loss(source.sample(num_sequences, length, seed=seed)).mean(axis=0)


class HiddenStateChain:
    """Tokens from one of a few hidden "topics" that switches rarely: context pays over
    many tokens.

    A hidden state ``z_t`` (the topic, one of ``K``) keeps its value from one token to
    the next with probability ``1 - switch_prob`` and otherwise jumps to one of the
    other ``K - 1`` at random. Each topic has its own order-1 transition table: token
    ``t`` is drawn from ``P_z(x_t | x_{t-1})`` with ``z = z_t``, and the first token
    from that topic's stationary distribution. The topics' tables are variations of one
    shared table (each row a Dirichlet draw centred on the shared row), so that telling
    the topics apart takes tens of tokens, not a few. The topic is never seen, so the
    best predictor infers it from everything it has read: the longer the context, the
    better it knows the topic, and the best achievable loss falls over many positions
    (an early-token curse far longer than one token), down to a level that the switching
    keeps above the topics' own entropy.

    The best predictor is exact: :meth:`log_loss` runs the forward algorithm in float64
    on the given tokens. Its mean by position, :meth:`optimal_loss_by_position`, is a
    Monte Carlo average of that exact loss (no closed form exists for a hidden Markov
    source).

    Args:
        vocab_size: ``V`` (at least 2).
        seed: seed of the random tables; another seed is another instance of the source.
        num_states: ``K`` (at least 2), the number of topics.
        switch_prob: probability that the topic changes between two tokens, in (0, 1).
        concentration: Dirichlet parameter of each row of the shared table; smaller
            values make the next token more predictable.
        topic_concentration: how close each topic's rows stay to the shared rows: row
            ``a`` of a topic is ``Dirichlet(topic_concentration * shared[a])``. Larger
            values make the topics harder to tell apart, so the floor falls more slowly
            and less.

    Attributes:
        transitions: float64 ``(K, V, V)``;
            ``transitions[z, a, b] = P_z(next b | last a)``.
        initial: float64 ``(K, V)``, each topic's stationary token distribution.
        shared: float64 ``(V, V)``, the table the topics vary.
        switch: float64 ``(K, K)``, the topic's transition matrix.
    """

    def __init__(
        self,
        vocab_size: int,
        seed: int,
        *,
        num_states: int = 8,
        switch_prob: float = 0.01,
        concentration: float = 0.5,
        topic_concentration: float = 10.0,
    ):
        self.vocab_size = _checks.positive_int("vocab_size", vocab_size)
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
        self.seed = _checks.integer("seed", seed)
        self.num_states = _checks.positive_int("num_states", num_states)
        if self.num_states < 2:
            raise ValueError(
                "num_states must be at least 2 (one topic is a plain Markov chain), "
                f"got {num_states}"
            )
        self.switch_prob = _checks.real("switch_prob", switch_prob)
        if not 0 < self.switch_prob < 1:
            raise ValueError(f"switch_prob must be in (0, 1), got {switch_prob}")
        concentration = _checks.real("concentration", concentration)
        topic_concentration = _checks.real("topic_concentration", topic_concentration)
        if concentration <= 0 or topic_concentration <= 0:
            raise ValueError(
                "concentration and topic_concentration must be positive, got "
                f"{concentration}, {topic_concentration}"
            )
        k, v = self.num_states, self.vocab_size
        rng = np.random.default_rng(self.seed)
        self.shared = rng.dirichlet(np.full(v, concentration), size=v)
        rows = [
            [rng.dirichlet(topic_concentration * self.shared[a]) for a in range(v)]
            for _ in range(k)
        ]
        self.transitions = np.array(rows)
        self.initial = np.stack([self._stationary(t) for t in self.transitions])
        self.switch = np.full((k, k), self.switch_prob / (k - 1))
        np.fill_diagonal(self.switch, 1 - self.switch_prob)

    @staticmethod
    def _stationary(table: np.ndarray) -> np.ndarray:
        """Stationary distribution of one topic's token chain, by power iteration."""
        # same fixed point; converges if periodic
        lazy = (table + np.eye(len(table))) / 2
        p = np.full(len(table), 1.0 / len(table))
        for _ in range(100_000):
            nxt = p @ lazy
            if np.abs(nxt - p).max() < 1e-15:
                return nxt / nxt.sum()
            p = nxt
        raise RuntimeError(
            "a topic's chain did not reach its stationary distribution; try another "
            "seed"
        )

    def sample(self, num_sequences: int, length: int, *, seed: int) -> np.ndarray:
        """Draw sequences whose first topic is uniform (the topics' stationary
        distribution).

        Returns:
            int64 ``(num_sequences, length)``.
        """
        n, length, rng = _sample_args(num_sequences, length, seed)
        k = self.num_states
        cumulative = np.cumsum(self.transitions, axis=-1)
        cumulative[..., -1] = 1.0  # guard against rounding in the last entry
        first = np.cumsum(self.initial, axis=-1)
        first[:, -1] = 1.0
        z = rng.integers(k, size=n)
        out = np.empty((n, length), dtype=np.int64)
        out[:, 0] = _draw(first[z], rng.random(n))
        for t in range(1, length):
            moves = rng.random(n) < self.switch_prob
            # one of the others
            z = np.where(moves, (z + rng.integers(1, k, size=n)) % k, z)
            out[:, t] = _draw(cumulative[z, out[:, t - 1]], rng.random(n))
        return out

    def log_loss(self, tokens) -> np.ndarray:
        """The best predictor's loss on given sequences,
        ``-log P(x_t | x_0 .. x_{t-1})``, in nats.

        Exact, by the forward algorithm in float64 (the topic's posterior after each
        token).

        Args:
            tokens: integer ``(n, s)`` array (or tensor) of token ids, ``s >= 2``.

        Returns:
            float64 ``(n, s - 1)``: entry ``[i, t - 1]`` is the loss of token ``t`` of
            row ``i``.
        """
        tokens = _token_array(tokens, self.vocab_size)
        n, s = tokens.shape
        # P(z_0, x_0), (n, K)
        posterior = self.initial[:, tokens[:, 0]].T / self.num_states
        posterior /= posterior.sum(axis=1, keepdims=True)
        out = np.empty((n, s - 1))
        for t in range(1, s):
            prior = posterior @ self.switch  # P(z_t | x_0 .. x_{t-1})
            likelihood = self.transitions[:, tokens[:, t - 1], tokens[:, t]].T  # (n, K)
            joint = prior * likelihood
            p = joint.sum(axis=1)
            out[:, t - 1] = -np.log(p)
            posterior = joint / p[:, None]
        return out

    def optimal_loss_by_position(
        self, length: int, *, num_sequences: int = 16_384, seed: int = 0
    ) -> np.ndarray:
        """The best achievable mean loss for token ``t`` from tokens ``0 .. t-1``,
        estimated.

        The mean of the exact :meth:`log_loss` over ``num_sequences`` sampled sequences:
        its standard error is about ``1 / sqrt(num_sequences)`` nats per position (0.008
        for the default), less for a mean over many positions.

        Returns:
            float64 ``(length - 1,)``: entry ``t - 1`` is the floor for token ``t``.
        """
        return _mean_by_position(self, length, num_sequences, seed)

    def entropy_rate(
        self, *, length: int = 1024, num_sequences: int = 1024, seed: int = 0
    ) -> float:
        """The floor far from the start, estimated: the mean exact loss of tokens
        ``length/2 ..``."""
        floors = self.optimal_loss_by_position(
            length, num_sequences=num_sequences, seed=seed
        )
        return float(floors[len(floors) // 2 :].mean())


class RepeatedSegment:
    """A random segment, repeated: after one period the rest of the sequence is a copy.

    Each sequence draws a period ``p`` uniformly from ``min_period .. max_period`` and
    ``p`` tokens independently from a token distribution ``q``; then ``x_t = x_{t - p}``
    for every ``t >= p``. Predicting a copied token needs the token exactly ``p`` back,
    and ``p`` must be read from the sequence itself: a retrieval task, in which a model
    that attends to the right earlier position pays nothing.

    The best predictor is exact (:meth:`log_loss`): it keeps the posterior over the
    periods that agree with the tokens so far. The first ``min_period`` tokens cost the
    entropy of ``q``; the floor falls once the periods can be told apart and is zero at
    the latest from the second copy of the longest period on.

    Args:
        vocab_size: ``V`` (at least 2).
        seed: seed of ``q``, a Dirichlet draw; another seed is another instance of the
            source.
        min_period, max_period: the range of periods, ``1 <= min_period <= max_period``.
        concentration: Dirichlet parameter of ``q`` (large: nearly uniform).

    Attributes:
        token_probs: float64 ``(V,)``, ``q``.
        periods: int64 ``(P,)``, the possible periods, each with probability ``1 / P``.
        stream: False: a long sample is one period repeated, not many sequences, so
            :func:`~companion.train.evaluate` draws each chunk as a sequence of its own.
    """

    stream = False

    def __init__(
        self,
        vocab_size: int,
        seed: int,
        *,
        min_period: int = 2,
        max_period: int = 16,
        concentration: float = 4.0,
    ):
        self.vocab_size = _checks.positive_int("vocab_size", vocab_size)
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be at least 2, got {vocab_size}")
        self.seed = _checks.integer("seed", seed)
        lo, hi = (
            _checks.positive_int("min_period", min_period),
            _checks.positive_int("max_period", max_period),
        )
        if lo > hi:
            raise ValueError(
                f"min_period must be at most max_period, got {min_period} > "
                f"{max_period}"
            )
        concentration = _checks.real("concentration", concentration)
        if concentration <= 0:
            raise ValueError(f"concentration must be positive, got {concentration}")
        self.periods = np.arange(lo, hi + 1)
        self.token_probs = np.random.default_rng(self.seed).dirichlet(
            np.full(self.vocab_size, concentration)
        )

    def sample(self, num_sequences: int, length: int, *, seed: int) -> np.ndarray:
        """Draw sequences, each with its own period and segment.

        Returns:
            int64 ``(num_sequences, length)``.
        """
        n, length, rng = _sample_args(num_sequences, length, seed)
        period = rng.choice(self.periods, size=n)
        segment = rng.choice(
            self.vocab_size, size=(n, self.periods[-1]), p=self.token_probs
        )
        t = np.arange(length)
        return np.take_along_axis(segment, t[None, :] % period[:, None], axis=1)

    def log_loss(self, tokens) -> np.ndarray:
        """The best predictor's loss on given sequences,
        ``-log P(x_t | x_0 .. x_{t-1})``, in nats.

        Exact: for each period, whether the tokens so far agree with it, and the
        probability of its segment's tokens; the prediction mixes the periods by their
        posterior.

        Args:
            tokens: integer ``(n, s)`` array (or tensor) of token ids, ``s >= 2``.

        Returns:
            float64 ``(n, s - 1)``: entry ``[i, t - 1]`` is the loss of token ``t`` of
            row ``i``. A copied token whose period is certain costs exactly 0.
        """
        tokens = _token_array(tokens, self.vocab_size)
        n, s = tokens.shape
        log_q = np.log(self.token_probs)
        # log P(p, x_<t)
        log_post = np.full((n, len(self.periods)), -np.log(len(self.periods)))
        out = np.empty((n, s - 1))
        for t in range(s):
            copies = self.periods <= t  # (P,): periods for which token t is a copy
            # (n, P): the token p back
            back = tokens[:, t - np.minimum(self.periods, t)]
            log_like = np.where(
                copies,
                np.where(back == tokens[:, t : t + 1], 0.0, -np.inf),
                log_q[tokens[:, t]][:, None],
            )
            joint = log_post + log_like
            if t > 0:  # -log sum_p P(p | x_<t) P(x_t | p, x_<t)
                top = log_post.max(axis=1, keepdims=True)
                evidence = np.log(np.exp(log_post - top).sum(axis=1)) + top[:, 0]
                jtop = joint.max(axis=1, keepdims=True)
                out[:, t - 1] = evidence - (
                    np.log(np.exp(joint - jtop).sum(axis=1)) + jtop[:, 0]
                )
            log_post = joint
        return out

    def optimal_loss_by_position(
        self, length: int, *, num_sequences: int = 16_384, seed: int = 0
    ) -> np.ndarray:
        """The best achievable mean loss for token ``t`` from tokens ``0 .. t-1``,
        estimated.

        The mean of the exact :meth:`log_loss` over ``num_sequences`` sampled sequences.
        Tokens ``t < min_period`` cost the entropy of ``q`` exactly in expectation, and
        tokens from ``2 * max_period - 1`` on cost exactly 0.

        Returns:
            float64 ``(length - 1,)``: entry ``t - 1`` is the floor for token ``t``.
        """
        return _mean_by_position(self, length, num_sequences, seed)

    def entropy_rate(self) -> float:
        """0: far from the start every token is a copy whose period is known."""
        return 0.0


def _sample_args(num_sequences, length, seed) -> tuple[int, int, np.random.Generator]:
    """Validated ``(num_sequences, length, generator)`` for a source's ``sample``."""
    num_sequences = _checks.positive_int("num_sequences", num_sequences)
    length = _checks.positive_int("length", length)
    return num_sequences, length, np.random.default_rng(_checks.integer("seed", seed))


def _token_array(tokens, vocab_size: int) -> np.ndarray:
    """Validated integer ``(n, s >= 2)`` token ids as a NumPy array."""
    tokens = np.asarray(tokens.cpu() if hasattr(tokens, "cpu") else tokens)
    if tokens.ndim != 2 or tokens.shape[1] < 2:
        raise ValueError(
            f"tokens must have shape (num_sequences, length >= 2), got {tokens.shape}"
        )
    if tokens.dtype.kind not in "iu":
        raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
    if tokens.min() < 0 or tokens.max() >= vocab_size:
        raise ValueError(
            f"token ids must be in [0, {vocab_size}), got values in [{tokens.min()}, "
            f"{tokens.max()}]"
        )
    return tokens


SOURCES = (MarkovChain, HiddenStateChain, RepeatedSegment)
"""The sources :func:`companion.train.train` accepts."""
