"""The SLURM pool provider's pure half (fawkes.coordinator.pool.decide) and its config block."""

from __future__ import annotations

import pytest

from fawkes.config import load_config
from fawkes.coordinator.pool import Allocation, PoolFacts, decide, shortfall
from fawkes.errors import ConfigError


def facts(free=0, head=None, clusters=2, short=2, allocs=(), held=()):
    return PoolFacts(free_hosts=free, queue_head_min_core=head, clusters=clusters, short_clusters=short,
                     allocations=tuple(allocs), held_hosts=frozenset(held))


def run(f, idle_since=None, now=100.0, **kw):
    args = dict(max_nodes=4, nodes_per_request=1, idle_s=10.0) | kw
    return decide(f, now=now, idle_since=idle_since or {}, **args)


def test_shortfall():
    assert shortfall(facts(free=0, clusters=2, short=2)) == 1            # every cluster has work waiting
    assert shortfall(facts(free=0, clusters=2, short=1)) == 0            # one is not short
    assert shortfall(facts(free=1, clusters=2, short=2)) == 0            # a free host: use it first
    assert shortfall(facts(free=0, clusters=0, short=0)) == 0            # nothing runs
    assert shortfall(facts(free=1, head=3, clusters=0, short=0)) == 2    # the queue head needs 3
    assert shortfall(facts(free=3, head=3, short=0)) == 0


def test_asks_when_every_cluster_is_short_and_not_twice():
    a = run(facts())
    assert a.request == 1 and a.release == () and "short of 1" in a.reason
    assert run(facts(), nodes_per_request=3).request == 3
    assert run(facts(free=0, head=3, clusters=0, short=0), nodes_per_request=1).request == 3
    pending = Allocation("7", "PENDING", 1)
    assert run(facts(allocs=[pending])).request == 0                     # one request at a time


def test_never_more_than_max_nodes():
    held = [Allocation("5", "RUNNING", 3, ("n1", "n2", "n3"))]
    a = run(facts(allocs=held, held={"n1", "n2", "n3"}), nodes_per_request=4)
    assert a.request == 1                                                # 3 held of 4
    full = [Allocation("5", "RUNNING", 4, ("n1", "n2", "n3", "n4"))]
    a = run(facts(allocs=full, held={"n1", "n2", "n3", "n4"}))
    assert a.request == 0 and "max_nodes 4" in a.reason


def test_gives_back_only_after_idle_s_and_only_when_no_node_holds_a_host():
    alloc = Allocation("9", "RUNNING", 2, ("n1", "n2"))
    busy = run(facts(free=1, short=0, allocs=[alloc], held={"n2"}))
    assert busy.release == () and busy.idle_since == {}                  # n2 is held: not idle
    first = run(facts(free=2, short=0, allocs=[alloc]), now=100.0)
    assert first.release == () and first.idle_since == {"9": 100.0}
    early = run(facts(free=2, short=0, allocs=[alloc]), idle_since=first.idle_since, now=109.0)
    assert early.release == () and early.idle_since == {"9": 100.0}
    late = run(facts(free=2, short=0, allocs=[alloc]), idle_since=early.idle_since, now=110.0)
    assert late.release == ("9",) and late.idle_since == {} and "idle for 10s" in late.reason
    # busy again in between: the idle clock starts over
    again = run(facts(free=1, short=0, allocs=[alloc], held={"n1"}), idle_since=first.idle_since, now=110.0)
    assert again.release == () and again.idle_since == {}


def test_a_pending_request_no_longer_needed_is_withdrawn_after_idle_s():
    pending = Allocation("3", "PENDING", 1)
    a = run(facts(free=1, short=0, allocs=[pending]), now=50.0)
    assert a.release == () and a.idle_since == {"3": 50.0}
    assert run(facts(free=1, short=0, allocs=[pending]), idle_since=a.idle_since, now=60.0).release == ("3",)
    assert run(facts(allocs=[pending]), idle_since=a.idle_since, now=60.0).release == ()  # still needed


@pytest.mark.parametrize("body, field", [
    ("{provider: pbs, partition: p, max_nodes: 2}", "pool.provider"),
    ("{provider: slurm, partition: 'a b', max_nodes: 2}", "pool.partition"),
    ("{provider: slurm, partition: \"p\\n\", max_nodes: 2}", "pool.partition"),
    ("{provider: slurm, partition: \"p\\0\", max_nodes: 2}", "pool.partition"),
    ("{provider: slurm, partition: p}", "pool.max_nodes"),
    ("{provider: slurm, partition: p, max_nodes: 0}", "pool.max_nodes"),
    ("{provider: slurm, partition: p, max_nodes: -1}", "pool.max_nodes"),
    ("{provider: slurm, partition: p, max_nodes: 1e30}", "pool.max_nodes"),
    ("{provider: slurm, partition: p, max_nodes: 2, idle_s: .nan}", "pool.idle_s"),
    ("{provider: slurm, partition: p, max_nodes: 2, idle_s: .inf}", "pool.idle_s"),
    ("{provider: slurm, partition: p, max_nodes: 2, idle_s: -5}", "pool.idle_s"),
    ("{provider: slurm, partition: p, max_nodes: 2, nodes_per_request: 3}", "pool"),
    ("{provider: slurm, partition: p, max_nodes: 2, job_name: 'x;rm'}", "pool.job_name"),
    ("{provider: slurm, partition: p, max_nodes: 2, work_dir: relative}", "pool.work_dir"),
    ("{provider: slurm, partition: p, max_nodes: 2, extra: 1}", "pool.extra"),
    ("3", "pool"),
])
def test_pool_config_errors_are_one_line_naming_the_field(tmp_path, body, field):
    p = tmp_path / "config.yaml"
    p.write_text(f"pool: {body}\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{p}:1: {field}")


def test_pool_config_ok_and_key_file_relative_to_the_config(tmp_path):
    p = tmp_path / "config.yaml"
    p.write_text("pool: {provider: slurm, partition: lab, max_nodes: 4, idle_s: 60, key_file: id_ed25519}\n")
    pool = load_config(p).pool
    assert (pool.partition, pool.max_nodes, pool.idle_s, pool.nodes_per_request) == ("lab", 4, 60.0, 1)
    assert pool.key_file == tmp_path / "id_ed25519"
    assert load_config(tmp_path / "config.yaml").pool.job_name == "fawkes-pool"


def test_pool_slurm_conf_relative_to_the_config_and_must_exist(tmp_path):
    p = tmp_path / "config.yaml"
    p.write_text("pool:\n  provider: slurm\n  partition: lab\n  max_nodes: 1\n  slurm_conf: slurm.conf\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    assert str(err.value) == f"{p}:5: pool.slurm_conf: {tmp_path / 'slurm.conf'} is not a file"
    (tmp_path / "slurm.conf").write_text("ClusterName=x\n")
    assert load_config(p).pool.slurm_conf == tmp_path / "slurm.conf"
    p.write_text("pool: {provider: slurm, partition: lab, max_nodes: 1, slurm_conf: /dev/null}\n")
    with pytest.raises(ConfigError, match="pool.slurm_conf: /dev/null is not a file"):
        load_config(p)
