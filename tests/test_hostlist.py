"""SLURM hostlist expansion, checked against the real `scontrol show hostnames` (Debian slurm-client)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fawkes.inventory.hostlist import HostlistError, expand, expand_cpus
from fawkes.inventory.slurm import allocation_hosts
from tests.conftest import run_cli, unavailable

CASES = [
    "n[1-3]", "n[01-10]", "rack[1-2]-n[01-02]", "a,b[1-2],c", "n[9-11]", "n[1,3-5,7]", "n[1-2],n[1-2]",
    "n[001-3]", "n[1-010]", "x[1-2]y[3-4]", "n[1-2]a[3]", "n1-ib", "n[01-2]", "n[1-02]", "foo", "a b",
    "n[0-0]", "n[05]", "n[1-3],x", "n[1-2][3-4]", "10.0.0.[1-2]", "[1-2]", "n[1-2],", ",a", "a,,b",
    "n[08-12]", "n[1-2]-[3-4]", "n[1-]", "n[1-3]x[1]", "n-[1-2]-x[3]", "a[1-2]b[3-4]c[5-6]",
    "a[1-2]b[3-4]c[5-6]d[7-8]", "n[10-011]", "x[2,1]", "n[1-2,2-3]", "a]b[1]", "n]",
    "n[00-02]", "n1 , n2", "a[1-2]b[03-4,7]", "n[1-65536]", "",
    # invalid in SLURM too
    "n[001-003]-ib", "n[3-1]", "n[]", "n[a-b]", "n[1-2]]", "x[1-2]-y", "n[1--2]", "n[-1]", "n[,1]",
    "n[1,,2]", "n[1-2[3]]", "n[1-65537]", "n[1]x", "n[1-2]:x",
]


@pytest.fixture(scope="module")
def scontrol(tmp_path_factory):
    if shutil.which("scontrol") is None:
        unavailable("scontrol (Debian slurm-client) is not installed")
    d = tmp_path_factory.mktemp("slurm")
    conf = d / "slurm.conf"
    conf.write_text("ClusterName=fawkestest\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\n"
                    "PartitionName=p Nodes=n1 Default=YES\n")

    def show(expr: str) -> list[str] | None:
        p = subprocess.run(["scontrol", "show", "hostnames", "--", expr], capture_output=True, text=True,
                           env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"}, timeout=30)
        if "Invalid hostlist" in p.stdout + p.stderr:  # scontrol exits 0 even then
            return None
        assert p.returncode == 0, p.stderr
        return p.stdout.split()
    assert show("n[1-2]") == ["n1", "n2"], "scontrol does not work with the test slurm.conf"
    return show


def ours(expr: str) -> list[str] | None:
    try:
        return expand(expr)
    except HostlistError:
        return None


@pytest.mark.parametrize("expr", CASES)
def test_same_as_scontrol(scontrol, expr):
    assert ours(expr) == scontrol(expr)


def test_known_values_without_scontrol():
    assert expand("n[01-03],gpu[1,4]") == ["n01", "n02", "n03", "gpu1", "gpu4"]
    assert expand("a[1-2]b[3-4]c[5-6]")[:5] == ["a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6", "a1b4c5"]
    for bad in ("n[3-1]", "n[1-3]-ib", "n[1-2", "n[ 1-2]", "n[+1]"):
        with pytest.raises(HostlistError):
            expand(bad)


@pytest.mark.parametrize("expr", ["a[b[1]", "n[1,m[2-3]", "tux[[1023-1032],cn-d[1000-1003]c[11-20]"])
def test_an_unterminated_bracket_is_an_error_where_slurm_half_accepts_it(expr):
    """SLURM reads these with a literal '[' in the names (n[1,m2 n[1,m3; 50 names for tux[[...);
    a '[' left open is an error here, as the module says."""
    with pytest.raises(HostlistError, match="unterminated"):
        expand(expr)


_prefix = st.text("abnx-.", min_size=0, max_size=3)
_num = st.integers(0, 120)


@st.composite
def _range(draw):
    lo, span, pad = draw(_num), draw(st.integers(0, 12)), draw(st.integers(0, 2))
    lo_s = str(lo).zfill(len(str(lo)) + pad)
    return draw(st.sampled_from([lo_s, f"{lo_s}-{lo + span}", f"{lo_s}-{str(lo + span).zfill(3)}"]))


@st.composite
def _host(draw):
    parts = [draw(_prefix)]
    for _ in range(draw(st.integers(0, 3))):
        ranges = ",".join(draw(st.lists(_range(), min_size=1, max_size=3)))
        parts.append(f"[{ranges}]" + draw(_prefix))
    if len(parts) > 1 and draw(st.booleans()):
        parts[-1] = parts[-1].rstrip("abnx-.") or parts[-1]  # mostly valid: no suffix after the last ]
    return "".join(parts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_host(), min_size=1, max_size=3).map(",".join))
def test_generated_expressions_match_scontrol(scontrol, expr):
    assert ours(expr) == scontrol(expr)


def test_cpus_per_node():
    assert expand_cpus("2(x3),1") == [2, 2, 2, 1]
    assert expand_cpus("72(x2),36") == [72, 72, 36]
    assert expand_cpus("8") == [8]
    for bad in ("2(x)", "x3", "2(3)", "", "2,,3", "-1"):
        with pytest.raises(HostlistError):
            expand_cpus(bad)


def test_allocation_hosts():
    assert allocation_hosts("n[1-3],g1", "4(x3),8") == [("n1", 4), ("n2", 4), ("n3", 4), ("g1", 8)]
    assert allocation_hosts("n[1-2]", "16") == [("n1", 16), ("n2", 16)]
    with pytest.raises(HostlistError, match="3 values for 2 nodes"):
        allocation_hosts("n[1-2]", "1(x3)")
    with pytest.raises(HostlistError, match="twice"):
        allocation_hosts("n[1-2],n1")
    with pytest.raises(HostlistError, match="safe identifier"):
        allocation_hosts("a]b[1]")


def test_cli_from_slurm_env_and_options(tmp_path):
    out = tmp_path / "alloc.yaml"
    r = run_cli("inventory", "from-slurm", "-o", str(out),
                env={"SLURM_JOB_NODELIST": "c[01-02]-n[1-2]", "SLURM_JOB_CPUS_PER_NODE": "2(x3),1"})
    assert r.returncode == 0, r.stderr
    from fawkes.inventory import load_inventory
    inv = load_inventory(out)
    assert [(h.name, h.address, h.cores) for h in inv.hosts] == [
        ("c01-n1", "c01-n1", 2), ("c01-n2", "c01-n2", 2), ("c02-n1", "c02-n1", 2), ("c02-n2", "c02-n2", 1)]
    assert inv.groups == {"slurm": ["c01-n1", "c01-n2", "c02-n1", "c02-n2"]}
    r = run_cli("inventory", "from-slurm", "--nodelist", "n[5-1]", "-o", str(tmp_path / "x.yaml"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "descending range" in r.stderr
    assert not (tmp_path / "x.yaml").exists()
    env_clean = {"SLURM_JOB_NODELIST": "", "SLURM_JOB_CPUS_PER_NODE": ""}
    r = run_cli("inventory", "from-slurm", env=env_clean)
    assert r.returncode == 2 and "--nodelist" in r.stderr


def _old_text(nodelist: str, cpus: str | None, **opts) -> str:
    """What from-slurm wrote before it wrote its YAML by hand: yaml.safe_dump of the same data."""
    import yaml

    from fawkes.inventory.slurm import inventory_doc
    return yaml.safe_dump(inventory_doc(nodelist, cpus, **opts), sort_keys=False, default_flow_style=None)


@pytest.mark.parametrize("nodelist,cpus,opts", [
    ("c[01-02]-n[1-2]", "2(x3),1", {}),
    # names YAML would read as numbers, booleans or null if written plain
    ("n[1-3],1e3,on,007,10,0x1F,null,yes,1.5,1000,Y,n.0,inf,nan,true,0o7,1-2", None,
     {"user": "ops", "key_file": "/k/id ed25519", "work_dir": "/srv/f", "known_hosts": "/a b: c #d"}),
    ("gpu[0001-2000],cpu[1-5]", "64(x2000),8(x5)", {"known_hosts": "'quoted' \"x\""}),
])
def test_from_slurm_fast_text_means_what_the_dumper_wrote(nodelist, cpus, opts):
    import yaml

    from fawkes.inventory.slurm import inventory_text
    text, n = inventory_text(nodelist, cpus, **opts)
    assert yaml.safe_load(text) == yaml.safe_load(_old_text(nodelist, cpus, **opts))
    assert n == len(yaml.safe_load(text)["hosts"])
    assert text.startswith(f"# SLURM allocation {nodelist}")


def test_from_slurm_output_loads_as_an_inventory(tmp_path):
    from fawkes.inventory import load_inventory
    out = tmp_path / "alloc.yaml"
    r = run_cli("inventory", "from-slurm", "--nodelist", "n[1-3],1e3,on,007", "--cpus-per-node", "4(x3),2,1,1",
                "-o", str(out))
    assert r.returncode == 0, r.stderr
    inv = load_inventory(out, check_files=False)
    assert [(h.name, h.address, h.cores) for h in inv.hosts] == [
        ("n1", "n1", 4), ("n2", "n2", 4), ("n3", "n3", 4), ("1e3", "1e3", 2), ("on", "on", 1), ("007", "007", 1)]
    for args, err in ((["--nodelist", "n1,x_y"], "'x_y' is not a DNS name"),
                      (["--nodelist", "n[1-2]", "--cpus-per-node", "0"], "0 CPUs for n1"),
                      (["--nodelist", "n1", "--cpus-per-node", str(10**30)], "CPUs for n1 (expected 1 to 1048576)"),
                      (["--nodelist", "n[1-2]", "--user", "a;b"], "--user: user 'a;b' is not a safe user name"),
                      (["--nodelist", "n[1-2]", "--work-dir", "rel"], "--work-dir:")):
        bad = tmp_path / "bad.yaml"
        r = run_cli("inventory", "from-slurm", *args, "-o", str(bad))
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and err in r.stderr, r.stderr
        assert not bad.exists()


def test_from_slurm_fast_name_check_accepts_only_valid_addresses():
    import random

    from fawkes.inventory.schema import SAFE_NAME, check_address
    from fawkes.inventory.slurm import _DNS_NAME
    rng = random.Random(7)
    seen = 0
    for _ in range(20_000):
        n = "".join(rng.choice("ab09_.-") for _ in range(rng.randint(1, 9)))
        if SAFE_NAME.match(n) and _DNS_NAME.match(n):
            check_address(n)  # raises if the shortcut let a bad address through
            seen += 1
    assert seen > 1000


def test_from_slurm_expressions_with_newlines_stay_in_their_comment():
    import yaml

    from fawkes.inventory.slurm import inventory_text
    text, n = inventory_text("n1\nn2", "4(x2)\n")  # whitespace-separated hostlist, a stray newline
    assert text.splitlines()[0] == "# SLURM allocation n1\\nn2 (cpus per node 4(x2)\\n)"
    assert [h["name"] for h in yaml.safe_load(text)["hosts"]] == ["n1", "n2"] and n == 2
