"""Sequence alignment of two key lists: how ``run_diff`` pairs rows when positions drift (one side
gained or lost a row, as an inject fork does).

:func:`align` matches the common prefix and suffix, runs Myers' diff on the middle within a work
budget, cuts what is left at patience anchors, and falls back to flux's positional pairing; every
index appears exactly once, in order. The algorithm is in docs/architecture.md.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Hashable, Sequence

__all__ = ["align", "matches", "DEFAULT_BUDGET"]

# Myers steps (diagonal visits) the whole alignment may spend: at most ~0.2 s of CPU in CPython for
# two 10,000-row runs. A stretch with up to ~1,200 edits is aligned exactly (one attempt may take
# half of what is left, so the pieces between anchors keep the other half).
DEFAULT_BUDGET = 1_500_000
_MAX_DEPTH = 12  # patience recursion depth; deeper pieces pair by position


def align(a: Sequence[Hashable], b: Sequence[Hashable], *, budget: int = DEFAULT_BUDGET
          ) -> list[tuple[int | None, int | None]]:
    """Pairs ``(i, j)``, ``(i, None)``, ``(None, j)`` covering both sequences in order."""
    out: list[tuple[int | None, int | None]] = []
    i = j = 0
    for mi, mj in matches(a, b, budget=budget):
        _pair_gap(out, i, mi, j, mj)
        out.append((mi, mj))
        i, j = mi + 1, mj + 1
    _pair_gap(out, i, len(a), j, len(b))
    return out


def _pair_gap(out: list, i0: int, i1: int, j0: int, j1: int) -> None:
    la, lb = i1 - i0, j1 - j0
    for k in range(max(la, lb)):
        out.append((i0 + k if k < la else None, j0 + k if k < lb else None))


def matches(a: Sequence[Hashable], b: Sequence[Hashable], *, budget: int = DEFAULT_BUDGET) -> list[tuple[int, int]]:
    """Index pairs with equal keys, strictly increasing on both sides (a common subsequence; the
    longest one whenever the budget allows)."""
    codes: dict[Hashable, int] = {}
    ca = [codes.setdefault(k, len(codes)) for k in a]
    cb = [codes.setdefault(k, len(codes)) for k in b]
    state = _Budget(budget)
    out: list[tuple[int, int]] = []
    _match_range(ca, 0, len(ca), cb, 0, len(cb), state, out, 0)
    return out


class _Budget:
    __slots__ = ("left",)

    def __init__(self, left: int) -> None:
        self.left = left


def _match_range(a: list[int], alo: int, ahi: int, b: list[int], blo: int, bhi: int, state: _Budget,
                 out: list[tuple[int, int]], depth: int) -> None:
    # common prefix
    while alo < ahi and blo < bhi and a[alo] == b[blo]:
        out.append((alo, blo))
        alo += 1
        blo += 1
    # common suffix (appended after the middle)
    tail = 0
    while alo < ahi - tail and blo < bhi - tail and a[ahi - 1 - tail] == b[bhi - 1 - tail]:
        tail += 1
    mid_ahi, mid_bhi = ahi - tail, bhi - tail
    if alo < mid_ahi and blo < mid_bhi:
        # Half the budget left: a stretch too different for it still leaves its anchored pieces some.
        limit = state.left if depth >= _MAX_DEPTH else state.left // 2
        found = _myers(a, alo, mid_ahi, b, blo, mid_bhi, state, limit)
        if found is not None:
            out.extend(found)
        elif depth < _MAX_DEPTH:
            _patience(a, alo, mid_ahi, b, blo, mid_bhi, state, out, depth)
    out.extend((mid_ahi + k, mid_bhi + k) for k in range(tail))


def _patience(a: list[int], alo: int, ahi: int, b: list[int], blo: int, bhi: int, state: _Budget,
              out: list[tuple[int, int]], depth: int) -> None:
    """Cut the range at keys unique on both sides (their longest increasing run), recurse between."""
    count_a: dict[int, int] = {}
    for x in a[alo:ahi]:
        count_a[x] = count_a.get(x, 0) + 1
    pos_b: dict[int, int] = {}
    count_b: dict[int, int] = {}
    for j in range(blo, bhi):
        x = b[j]
        if x in count_a and count_a[x] == 1:
            count_b[x] = count_b.get(x, 0) + 1
            pos_b[x] = j
    cands = [(i, pos_b[a[i]]) for i in range(alo, ahi) if count_a[a[i]] == 1 and count_b.get(a[i]) == 1]
    anchors = _longest_increasing(cands)
    if not anchors:
        return  # nothing to hold on to: the caller pairs this stretch by position
    pi, pj = alo, blo
    for i, j in anchors:
        _match_range(a, pi, i, b, pj, j, state, out, depth + 1)
        out.append((i, j))
        pi, pj = i + 1, j + 1
    _match_range(a, pi, ahi, b, pj, bhi, state, out, depth + 1)


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of ``pairs`` (sorted by i) whose j increase too (patience sorting)."""
    tops: list[int] = []  # smallest j ending an increasing run of each length
    top_idx: list[int] = []
    back: list[int] = []
    for n, (_i, j) in enumerate(pairs):
        k = bisect_left(tops, j)
        back.append(top_idx[k - 1] if k else -1)
        if k == len(tops):
            tops.append(j)
            top_idx.append(n)
        else:
            tops[k] = j
            top_idx[k] = n
    run: list[tuple[int, int]] = []
    n = top_idx[-1] if top_idx else -1
    while n >= 0:
        run.append(pairs[n])
        n = back[n]
    run.reverse()
    return run


def _myers(a: list[int], alo: int, ahi: int, b: list[int], blo: int, bhi: int,
           state: _Budget, limit: int) -> list[tuple[int, int]] | None:
    """The matches of a shortest edit script of ``a[alo:ahi]`` → ``b[blo:bhi]`` (Myers 1986, greedy
    forward pass keeping each round's frontier for the walk back), or None when it would take more
    than ``limit`` steps. The steps taken are charged to ``state`` either way."""
    n, m = ahi - alo, bhi - blo
    max_d = n + m
    off = max_d + 1
    v = [0] * (2 * max_d + 3)
    trace: list[list[int]] = []
    spent = 0
    for d in range(max_d + 1):
        spent += d + 1
        if spent > limit:
            state.left -= spent - (d + 1)
            return None
        trace.append(v[off - d - 1:off + d + 2])
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and v[off + k - 1] < v[off + k + 1]):
                x = v[off + k + 1]
            else:
                x = v[off + k - 1] + 1
            y = x - k
            while x < n and y < m and a[alo + x] == b[blo + y]:
                x += 1
                y += 1
            v[off + k] = x
            if x >= n and y >= m:
                state.left -= spent
                return _walk_back(trace, d, k, n, m, alo, blo)
    return None  # unreachable: d = n + m always reaches the end


def _walk_back(trace: list[list[int]], d_end: int, k_end: int, n: int, m: int, alo: int, blo: int
               ) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    x, y = n, m
    for d in range(d_end, 0, -1):
        prev = trace[d]  # the frontier before round d: index k maps to k + d (slice of width 2d+3 from -d-1)
        k = x - y

        def at(kk: int, prev=prev, d=d) -> int:
            return prev[kk + d + 1]

        if k == -d or (k != d and at(k - 1) < at(k + 1)):
            pk = k + 1
        else:
            pk = k - 1
        px = at(pk)
        py = px - pk
        # the snake from the step's end point back to (x, y)
        sx = px if pk == k + 1 else px + 1
        sy = sx - k
        while x > sx and y > sy:
            x -= 1
            y -= 1
            out.append((alo + x, blo + y))
        x, y = px, py
    while x > 0 and y > 0:  # round 0: the snake from (0, 0)
        x -= 1
        y -= 1
        out.append((alo + x, blo + y))
    out.reverse()
    return out
