"""SLURM hostlist expressions, expanded exactly as ``scontrol show hostnames`` does.

    expand("n[01-03],gpu[1,4]")       -> ["n01", "n02", "n03", "gpu1", "gpu4"]
    expand("rack[1-2]-n[1-2]")        -> ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]
    expand_cpus("2(x3),1")            -> [2, 2, 2, 1]

Rules (SLURM 22.05 hostlist.c): hosts are separated by commas or whitespace outside brackets;
a range ``lo-hi`` is zero-padded to the width of ``lo``; ``lo-`` means ``lo``; duplicates and
order are kept; nothing may follow the last bracket group; with several bracket groups the
last one varies fastest and the earlier ones are expanded from right to left (SLURM's own
order, e.g. ``a[1-2]b[3-4]c[5-6]`` gives a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 ...).
Stricter than SLURM on garbage it half-accepts: an unterminated ``[``, whitespace, signs or
letters inside a bracket are errors here.
"""

from __future__ import annotations

import re

from fawkes.errors import FawkesError

MAX_RANGE = 65536      # SLURM: "Too many hosts in range" above this
MAX_HOSTS = 1 << 20    # a sanity bound on the whole expansion
_NUM = re.compile(r"^[0-9]+$")
_SEPARATORS = " \t\n,"


class HostlistError(FawkesError):
    """An invalid hostlist or cpus-per-node expression."""


def expand(expr: str) -> list[str]:
    """All host names of a SLURM hostlist expression, in SLURM's order (duplicates kept)."""
    out: list[str] = []
    for tok in _tokens(expr):
        _balanced(tok, expr)
        lb = tok.rfind("[")
        if lb < 0:
            out.append(tok)
            continue
        rb = tok.find("]", lb)
        if rb < 0:
            raise HostlistError(f"invalid hostlist {expr!r}: unterminated '[' in {tok!r}")
        if rb != len(tok) - 1:
            raise HostlistError(f"invalid hostlist {expr!r}: nothing may follow the last ']' in {tok!r}")
        ranges = _ranges(tok[lb + 1:rb], expr)
        _push(out, tok[:lb], ranges, expr)
        if len(out) > MAX_HOSTS:
            raise HostlistError(f"invalid hostlist {expr!r}: more than {MAX_HOSTS} hosts")
    return out


def _balanced(tok: str, expr: str) -> None:
    """Every ``[`` is closed by a ``]`` before the next ``[`` (SLURM reads ``n[1,m[2-3]`` as the
    names ``n[1,m2`` and ``n[1,m3``; here it is an error).  A ``]`` outside a group is a plain
    character, as in SLURM."""
    inside = False
    for ch in tok:
        if ch == "[":
            if inside:
                raise HostlistError(f"invalid hostlist {expr!r}: unterminated '[' in {tok!r}")
            inside = True
        elif ch == "]":
            inside = False
    if inside:
        raise HostlistError(f"invalid hostlist {expr!r}: unterminated '[' in {tok!r}")


def _tokens(expr: str) -> list[str]:
    toks, cur, depth = [], [], 0
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        if ch in _SEPARATORS and depth == 0:
            if cur:
                toks.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        toks.append("".join(cur))
    return toks


def _ranges(text: str, expr: str) -> list[tuple[int, int, int]]:
    """``"1,03-5"`` -> [(1, 1, 1), (3, 5, 2)] as (lo, hi, width)."""
    out = []
    for part in text.split(","):
        lo_s, dash, hi_s = part.partition("-")
        if not _NUM.match(lo_s) or (dash and hi_s and not _NUM.match(hi_s)):
            raise HostlistError(f"invalid hostlist {expr!r}: bad range {part!r}")
        lo = int(lo_s)
        hi = int(hi_s) if hi_s else lo
        if lo > hi:
            raise HostlistError(f"invalid hostlist {expr!r}: descending range {part!r}")
        if hi - lo + 1 > MAX_RANGE:
            raise HostlistError(f"invalid hostlist {expr!r}: too many hosts in range {part!r}")
        out.append((lo, hi, len(lo_s)))
    return out


def _push(out: list[str], prefix: str, ranges: list[tuple[int, int, int]], expr: str) -> None:
    """SLURM's _push_range_list: expand the rightmost bracket group of ``prefix`` (recursively)."""
    lb = prefix.rfind("[")
    rb = prefix.rfind("]", lb + 1) if lb >= 0 else -1
    if lb < 0 or rb < 0:
        for lo, hi, width in ranges:
            out.extend(f"{prefix}{n:0{width}d}" for n in range(lo, hi + 1))
        return
    head, middle, tail = prefix[:lb], prefix[lb + 1:rb], prefix[rb + 1:]
    recurse = "[" in head
    for lo, hi, width in _ranges(middle, expr):
        for n in range(lo, hi + 1):
            new_prefix = f"{head}{n:0{width}d}{tail}"
            if recurse:
                _push(out, new_prefix, ranges, expr)
            else:
                for rlo, rhi, rwidth in ranges:
                    out.extend(f"{new_prefix}{m:0{rwidth}d}" for m in range(rlo, rhi + 1))
            if len(out) > MAX_HOSTS:
                raise HostlistError(f"invalid hostlist {expr!r}: more than {MAX_HOSTS} hosts")


_CPUS = re.compile(r"^([0-9]+)(?:\(x([0-9]+)\))?$")


def expand_cpus(expr: str) -> list[int]:
    """``SLURM_JOB_CPUS_PER_NODE`` form: ``"72(x2),36"`` -> [72, 72, 36]."""
    out: list[int] = []
    for part in expr.split(","):
        m = _CPUS.match(part.strip())
        if not m:
            raise HostlistError(f"invalid cpus-per-node {expr!r}: bad item {part!r} (expected N or N(xM))")
        count = int(m.group(2)) if m.group(2) else 1
        if count < 1 or count > MAX_HOSTS:
            raise HostlistError(f"invalid cpus-per-node {expr!r}: bad repeat count in {part!r}")
        out.extend([int(m.group(1))] * count)
    return out
