"""Suspend and resume one process tree on a remote host through cgroups, over SSH (BIG-C's IP).

:func:`suspend_script` builds one shell script that, run as root on the host (through
:class:`fawkes.ssh.Executor`), finds the tree of a root process (the root and all its descendants,
from ``ps``), moves exactly that tree into a child group named ``NAME`` of the group it is in (in
each hierarchy used: the process stays under its host's group, its limits still apply) and
deprives it, in BIG-C's order:

1. CPU to the minimal footprint (1 % by default): cgroup v2 ``cpu.max`` when the v2 hierarchy
   offers the cpu controller there, else v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``;
2. memory to the minimal footprint (64 MB): v2 ``memory.high`` (the kernel reclaims down to it,
   swapping where there is swap; nothing is killed), only where v2 offers the memory controller
   (v1 has no such throttle: a v1 hard limit would kill what does not fit, so v1 is left alone);
3. optionally frozen outright: v1 ``freezer.state`` ``FROZEN``, else v2 ``cgroup.freeze`` (waits
   until the kernel reports it frozen).  Freezing is forced when CPU cannot be limited.

:func:`resume_script` reverses it: thaw, memory limit lifted, CPU limit lifted, the processes
moved back into the group they came from and the child group removed (nothing is left behind).

The scripts decide which hierarchy to use on the host itself (``/proc/mounts``), so one call works
on cgroup v1, v2 and hybrid hosts.  Every value that reaches the shell is quoted (:class:`Script`);
the group name is restricted to ``[A-Za-z0-9_.@-]``.  Only the tree's processes are moved: the
script prints the group's members and the tree it computed (``members``/``tree`` lines) and
:func:`parse` refuses a suspension whose group holds anything else.

The scripts are plain functions of their arguments, for any caller that freezes processes (the
``shrink_mode: suspend`` of :mod:`fawkes.coordinator.suspend`; a watchdog could use the same).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fawkes.errors import FawkesError
from fawkes.ssh.shell import Script, trusted

PERIOD_US = 100_000
MIB = 1 << 20
_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,200}$")

#: shared shell functions (trusted text: no value of the caller in it)
_LIB = r"""
set -u
say() { echo "$*"; }
die() { echo "fawkes-cgroup: $*" >&2; exit 3; }
tree() {  # tree PID: the process and its descendants (zombies left out: they cannot move), one pid a line
  ps -e -o pid= -o ppid= -o stat= | awk -v r="$1" '$3 !~ /^Z/ {k[$2] = k[$2] " " $1}
    END {q = r; while (q != "") {n = split(q, a, " "); q = ""; for (i = 1; i <= n; i++) {print a[i]; q = q k[a[i]]}}}'
}
v1mount() {  # v1mount CONTROLLER: where its v1 hierarchy is mounted
  awk -v c="$1" '$3 == "cgroup" {n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) {print $2; exit}}' \
    /proc/mounts
}
v2mount() { awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts; }
cgpath() {  # cgpath PID CONTROLLER ("" for v2): the process's group in that hierarchy
  awk -v c="$2" '{i = index($0, ":"); id = substr($0, 1, i - 1); r = substr($0, i + 1); j = index(r, ":");
    ctl = substr(r, 1, j - 1); p = substr(r, j + 1);
    if (c == "") { if (id == "0") {print p; exit} }
    else { n = split(ctl, o, ","); for (k = 1; k <= n; k++) if (o[k] == c) {print p; exit} } }' "/proc/$1/cgroup"
}
v2has() {  # v2has CONTROLLER: the v2 hierarchy offers it at its root
  [ -n "$V2" ] && [ -f "$V2/cgroup.controllers" ] && tr ' ' '\n' < "$V2/cgroup.controllers" | grep -qx "$1"
}
V2=$(v2mount); V1CPU=$(v1mount cpu); V1FRZ=$(v1mount freezer)
"""

_SUSPEND = _LIB + r"""
case "$root" in ''|*[!0-9]*) die "no process to suspend for $NAME (not running)";; esac
# the child group of the root's group in each hierarchy used (already there after an earlier call)
child() { case "$2" in */"$NAME") echo "$1$2";; *) echo "$1${2%/}/$NAME";; esac; }
dirs=""; cpu=""; mem=""; frz=""
if v2has cpu || v2has memory; then
  g=$(child "$V2" "$(cgpath "$root" "")"); parent=$(dirname "$g")
  for c in cpu memory; do
    if v2has "$c" && ! tr ' ' '\n' < "$parent/cgroup.subtree_control" | grep -qx "$c"; then
      echo "+$c" > "$parent/cgroup.subtree_control" 2>/dev/null || true
    fi
  done
  mkdir -p "$g" || die "cannot create $g"
  tr ' ' '\n' < "$g/cgroup.controllers" | grep -qx cpu && cpu="v2 $g"
  tr ' ' '\n' < "$g/cgroup.controllers" | grep -qx memory && mem="v2 $g"
  dirs="$g"
fi
if [ -z "$cpu" ] && [ -n "$V1CPU" ]; then
  g=$(child "$V1CPU" "$(cgpath "$root" cpu)"); mkdir -p "$g" || die "cannot create $g"
  cpu="v1 $g"; dirs="$dirs $g"
fi
[ -z "$cpu" ] && [ "$FREEZE" = 0 ] && { say "note cpu cannot be limited here: frozen instead"; FREEZE=1; }
if [ "$FREEZE" = 1 ]; then
  if [ -n "$V1FRZ" ]; then
    g=$(child "$V1FRZ" "$(cgpath "$root" freezer)"); mkdir -p "$g" || die "cannot create $g"
    frz="v1 $g"; dirs="$dirs $g"
  elif [ -n "$V2" ]; then
    g=$(child "$V2" "$(cgpath "$root" "")"); mkdir -p "$g" || die "cannot create $g"
    frz="v2 $g"; case " $dirs " in *" $g "*) ;; *) dirs="$dirs $g";; esac
  else
    die "no freezer: neither a v1 freezer hierarchy nor cgroup v2"
  fi
fi
[ -n "$dirs" ] || die "no cgroup hierarchy to use"
# move the tree (again until nothing moves: a child forked meanwhile is caught on the next pass)
n=0
while [ $n -lt 10 ]; do
  moved=0
  for p in $(tree "$root"); do
    for d in $dirs; do
      grep -qx "$p" "$d/cgroup.procs" 2>/dev/null || { echo "$p" > "$d/cgroup.procs" 2>/dev/null && moved=1; }
    done
  done
  [ $moved = 0 ] && break
  n=$((n + 1))
done
# 1. CPU, 2. memory, 3. freeze
set -- $cpu
if [ $# -eq 2 ]; then
  if [ "$1" = v2 ]; then echo "$Q $P" > "$2/cpu.max" || die "cannot write $2/cpu.max"
  else echo "$P" > "$2/cpu.cfs_period_us" && echo "$Q" > "$2/cpu.cfs_quota_us" || die "cannot write $2/cpu.cfs_quota_us"
  fi
  say "cpu $1 $Q $P $2"
fi
set -- $mem
if [ $# -eq 2 ] && [ "$MEM" -gt 0 ]; then echo "$MEM" > "$2/memory.high" && say "memory $1 $MEM $2"; fi
set -- $frz
if [ $# -eq 2 ]; then
  if [ "$1" = v1 ]; then
    echo FROZEN > "$2/freezer.state" || die "cannot write $2/freezer.state"
    i=0; while [ "$(cat "$2/freezer.state")" != FROZEN ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    [ "$(cat "$2/freezer.state")" = FROZEN ] || die "$2 still $(cat "$2/freezer.state") after 10 s"
  else
    echo 1 > "$2/cgroup.freeze" || die "cannot write $2/cgroup.freeze"
    i=0; while ! grep -qx 'frozen 1' "$2/cgroup.events" && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    grep -qx 'frozen 1' "$2/cgroup.events" || die "$2 not frozen after 10 s"
  fi
  say "frozen $1 $2"
fi
say "root $root"
say "tree $(tree "$root" | tr '\n' ' ')"
for d in $dirs; do say "members $d $(tr '\n' ' ' < "$d/cgroup.procs")"; done
"""

_RESUME = _LIB + r"""
found() {  # found MOUNT: the groups called NAME under it
  [ -n "$1" ] && [ -d "$1" ] && find "$1" -mindepth 1 -maxdepth 12 -type d -name "$NAME" 2>/dev/null
}
# 1. thaw
for g in $(found "$V1FRZ"); do
  echo THAWED > "$g/freezer.state"
  i=0; while [ "$(cat "$g/freezer.state")" != THAWED ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
  say "thawed v1 $g"
done
V2G=$(found "$V2")
for g in $V2G; do
  if [ -f "$g/cgroup.freeze" ] && [ "$(cat "$g/cgroup.freeze")" = 1 ]; then
    echo 0 > "$g/cgroup.freeze"; say "thawed v2 $g"
  fi
done
# 2. memory, 3. CPU
for g in $V2G; do
  [ -f "$g/memory.high" ] && echo max > "$g/memory.high" && say "memory v2 max $g"
  [ -f "$g/cpu.max" ] && echo "max $P" > "$g/cpu.max" && say "cpu v2 max $g"
done
for g in $(found "$V1CPU"); do echo -1 > "$g/cpu.cfs_quota_us" && say "cpu v1 max $g"; done
# back where they came from; the groups go
pids=""
for g in $(found "$V1FRZ") $V2G $(found "$V1CPU"); do
  up=$(dirname "$g")
  # moved again on every try: a process the tree forked meanwhile (an executor starting as the quota
  # lifts) is born in the group and keeps it busy (the conformance kit's suspend of Spark, 2026-11-27)
  i=0
  while [ $i -lt 100 ]; do
    for p in $(cat "$g/cgroup.procs" 2>/dev/null); do echo "$p" > "$up/cgroup.procs" 2>/dev/null; pids="$pids $p"; done
    rmdir "$g" 2>/dev/null && break
    sleep 0.05; i=$((i + 1))
  done
  [ -d "$g" ] && die "cannot remove $g (still busy)"
  say "removed $g"
done
say "resumed $(echo $pids | tr ' ' '\n' | sort -un | tr '\n' ' ')"
"""

_STATE = _LIB + r"""
for m in "$V1FRZ" "$V2" "$V1CPU"; do
  [ -n "$m" ] && [ -d "$m" ] || continue
  for g in $(find "$m" -mindepth 1 -maxdepth 12 -type d -name "$NAME" 2>/dev/null); do
    s=""
    [ -f "$g/freezer.state" ] && s="freezer=$(cat "$g/freezer.state")"
    [ -f "$g/cgroup.freeze" ] && s="$s freeze=$(cat "$g/cgroup.freeze")"
    [ -f "$g/cpu.cfs_quota_us" ] && s="$s quota=$(cat "$g/cpu.cfs_quota_us")"
    [ -f "$g/cpu.max" ] && s="$s cpu.max=$(tr ' ' / < "$g/cpu.max")"
    say "group $g $s"
    say "members $g $(tr '\n' ' ' < "$g/cgroup.procs")"
  done
done
"""


#: when no cgroup hierarchy is mounted where the script runs (a network namespace entered with
#: ``ip netns exec`` mounts a fresh /sys over the machine's cgroup mounts: the lab's hosts), the
#: script runs in a private mount namespace of its own in which every v1 hierarchy (controllers
#: grouped as /proc/cgroups says) and cgroup2 are mounted under /sys/fs/cgroup; the groups it
#: creates and changes are the kernel's, they outlive that namespace
_MOUNT_ALL = r"""
mount -t tmpfs fawkes-cgroups /sys/fs/cgroup || exit 3
for h in $(awk 'NR > 1 && $2 > 0 && $4 == 1 {print $2}' /proc/cgroups | sort -un); do
  o=$(awk -v h="$h" 'NR > 1 && $2 == h && $4 == 1 {printf "%s%s", s, $1; s = ","}' /proc/cgroups)
  mkdir -p "/sys/fs/cgroup/$o" && mount -t cgroup -o "$o" cgroup "/sys/fs/cgroup/$o" 2>/dev/null
done
if grep -qw cgroup2 /proc/filesystems; then
  mkdir -p /sys/fs/cgroup/unified && mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified 2>/dev/null
fi
"""


def _visible(body: Script) -> Script:
    """``body`` run where cgroups are mounted (see :data:`_MOUNT_ALL`)."""
    text = str(body)
    return Script("if awk '$3 == \"cgroup\" || $3 == \"cgroup2\" {{f = 1}} END {{exit !f}}' /proc/mounts; then\n"
                  "  sh -c {inline}\nelse\n  unshare -m --propagation private sh -c {mounted}\nfi\n",
                  inline=text, mounted=_MOUNT_ALL + text)


def group_name(owner: str) -> str:
    """The child group's name for ``owner`` (say ``fawkes-suspend-CLUSTER@HOST``), checked."""
    if not _NAME.match(owner):
        raise FawkesError(f"cgroup name {owner!r}: only letters, digits and _.@- are allowed")
    return owner


@dataclass(frozen=True)
class Footprint:
    """What a suspended tree keeps: ``cpu_percent`` of one CPU, ``memory_mb`` (v2 ``memory.high``;
    0: memory left alone), and whether it is frozen outright as well."""

    cpu_percent: float = 1.0
    memory_mb: int = 64
    freeze: bool = False

    def quota_us(self) -> int:
        return max(1000, round(PERIOD_US * self.cpu_percent / 100.0))  # the kernel's least quota is 1 ms


def suspend_script(getpid: Script, name: str, footprint: Footprint = Footprint()) -> Script:
    """The script that suspends the tree of the process whose pid ``getpid`` prints (see the module)."""
    head = Script("NAME={name}; Q={quota}; P={period}; MEM={mem}; FREEZE={freeze}\n"
                  "root=$({getpid}) || root=''\n",
                  getpid=getpid, name=group_name(name), quota=footprint.quota_us(), period=PERIOD_US,
                  mem=int(footprint.memory_mb) * MIB, freeze=1 if footprint.freeze else 0)
    return _visible(Script("{head}{body}", head=head, body=trusted(_SUSPEND)))


def resume_script(name: str) -> Script:
    """The script that resumes every group called ``name`` on the host (a no-op when there is none)."""
    return _visible(Script("NAME={name}; P={period}\n{body}", name=group_name(name), period=PERIOD_US,
                           body=trusted(_RESUME)))


def state_script(name: str) -> Script:
    """The script that lists the groups called ``name``, their limits and members."""
    return _visible(Script("NAME={name}\n{body}", name=group_name(name), body=trusted(_STATE)))


@dataclass(frozen=True)
class Suspended:
    """What :func:`suspend_script` printed: the root pid, the tree, each group's members, what was set."""

    root: int
    tree: frozenset[int]
    members: dict[str, frozenset[int]] = field(default_factory=dict)
    cpu: str | None = None  # "v1 QUOTA PERIOD DIR" / "v2 ..."
    memory: str | None = None
    frozen: str | None = None  # "v1 DIR" / "v2 DIR"
    notes: tuple[str, ...] = ()

    @property
    def pids(self) -> frozenset[int]:
        return frozenset().union(*self.members.values()) if self.members else frozenset()


def parse(host: str, out: str) -> Suspended:
    """Read :func:`suspend_script`'s output; refuse a group holding anything but the tree (one line)."""
    root, tree, members, cpu, mem, frz, notes = None, frozenset(), {}, None, None, None, []
    for ln in out.splitlines():
        word, _, rest = ln.partition(" ")
        if word == "root":
            root = int(rest)
        elif word == "tree":
            tree = frozenset(int(p) for p in rest.split())
        elif word == "members":
            d, _, ps = rest.partition(" ")
            members[d] = frozenset(int(p) for p in ps.split())
        elif word == "cpu":
            cpu = rest
        elif word == "memory":
            mem = rest
        elif word == "frozen":
            frz = rest
        elif word == "note":
            notes.append(rest)
    if root is None or not members:
        raise FawkesError(f"{host}: suspend printed no group: {out.strip()[-200:]!r}")
    for d, ps in members.items():
        if root not in ps:
            raise FawkesError(f"{host}: process {root} is not in {d} after the move")
        if ps - tree:
            raise FawkesError(f"{host}: {d} holds processes outside the suspended tree: "
                              f"{' '.join(map(str, sorted(ps - tree)))}")
    return Suspended(root, tree, members, cpu, mem, frz, tuple(notes))
