"""Property-based fuzzing of the whole pipeline (issue 10).

Random explicit topologies (with and without switches, uneven and fractional
bandwidths, one-way links) and random family parameters are compiled with
every collective, algorithm, protocol, instance count and backend.  Each case
must end in a file that ``colc verify`` accepts or in a clean error (exit 1,
one line), never in an internal error (exit 3).  Random and mutated YAML text
must give a ``Topology`` or a ``SpecError``/``TopologyError``, nothing else.

Two hypothesis profiles: ``fast`` (the default, derandomized so ``make test``
is reproducible, a few dozen cases) and ``long`` (``make fuzz``:
``COLC_FUZZ=long``, thousands of random cases).
"""

from __future__ import annotations

import os
from fractions import Fraction

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from colc.cli import main
from colc.errors import SpecError, TopologyError
from colc.frontends import parse_topology_text

settings.register_profile(
    "fast", max_examples=12, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile(
    "long", max_examples=int(os.environ.get("COLC_FUZZ_EXAMPLES", "400")), deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
PROFILE = "long" if os.environ.get("COLC_FUZZ") == "long" else "fast"
#: Cases of the cheap parser fuzzers (no compilation) per profile.
PARSE_EXAMPLES = 2000 if PROFILE == "long" else 150

BANDWIDTHS = st.one_of(
    st.integers(1, 400),
    st.fractions(Fraction(1, 8), Fraction(400), max_denominator=16),
    st.sampled_from([Fraction(25, 2), Fraction(50, 3), Fraction(1, 1000)]),
)


@st.composite
def explicit_topologies(draw) -> str:
    """YAML of a random explicit topology: 2-6 ranks, maybe switches, random links."""
    n = draw(st.integers(2, 6))
    switches = draw(st.integers(0, 2))
    ranks = [f"g{i}" for i in range(n)]
    sws = [f"s{i}" for i in range(switches)]
    lines = ["name: fuzz", "nodes:"]
    lines += [f"  - {{id: {r}, kind: gpu}}" for r in ranks]
    lines += [f"  - {{id: {s}, kind: switch}}" for s in sws]
    lines.append("links:")
    nodes = ranks + sws
    # A backbone that usually connects everything (a ring or a star on a switch).
    if sws and draw(st.booleans()):
        for r in ranks:
            lines.append(_link(r, sws[0], draw(BANDWIDTHS), True))
    else:
        duplex = draw(st.booleans())
        for i in range(n):
            if n == 2 and i == 1 and duplex:
                break
            lines.append(_link(ranks[i], ranks[(i + 1) % n], draw(BANDWIDTHS), duplex))
    extra = draw(st.lists(st.tuples(st.sampled_from(nodes), st.sampled_from(nodes),
                                    BANDWIDTHS, st.booleans()), max_size=5))
    for a, b, bw, duplex in extra:
        if a != b:
            lines.append(_link(a, b, bw, duplex))
    return "\n".join(lines) + "\n"


def _link(a: str, b: str, bw: Fraction | int, duplex: bool) -> str:
    text = f"{bw.numerator}/{bw.denominator}" if isinstance(bw, Fraction) else str(bw)
    return f"  - {{src: {a}, dst: {b}, bandwidth: \"{text}\", duplex: {str(duplex).lower()}}}"


@st.composite
def family_topologies(draw) -> str:
    """YAML of a small random family topology."""
    bw = draw(st.integers(1, 100))
    kind = draw(st.sampled_from(["ring", "torus", "hypercube", "complete", "circulant",
                                 "generalized-kautz", "complete-bipartite"]))
    if kind == "ring":
        return (f"family: ring\nranks: {draw(st.integers(2, 8))}\nbandwidth: {bw}\n"
                f"bidirectional: {str(draw(st.booleans())).lower()}\n")
    if kind == "torus":
        dims = draw(st.lists(st.integers(2, 4), min_size=1, max_size=2))
        return f"family: torus\ndims: {dims}\nbandwidth: {bw}\n"
    if kind == "hypercube":
        return f"family: hypercube\ndim: {draw(st.integers(1, 3))}\nbandwidth: {bw}\n"
    if kind == "circulant":
        n = draw(st.integers(3, 9))
        offs = draw(st.lists(st.integers(1, n - 1), min_size=1, max_size=3))
        return f"family: circulant\nranks: {n}\noffsets: {offs}\nbandwidth: {bw}\n"
    if kind == "generalized-kautz":
        return (f"family: generalized-kautz\nranks: {draw(st.integers(3, 10))}\n"
                f"degree: {draw(st.integers(1, 3))}\nbandwidth: {bw}\n")
    n = draw(st.integers(2, 7))
    if kind == "complete-bipartite":
        n += n % 2
    return f"family: {kind}\nranks: {n}\nbandwidth: {bw}\n"


OPTIONS = st.fixed_dictionaries({
    "collective": st.sampled_from(["allreduce", "allgather", "reducescatter"]),
    "algorithm": st.sampled_from(["ring", "bfb", "trees", "trees", "auto"]),
    "protocol": st.sampled_from(["Simple", "LL", "LL128"]),
    "instances": st.integers(1, 2),
    "backend": st.sampled_from(["msccl", "msccl", "oneccl"]),
    "mode": st.sampled_from([[], ["--inplace"], ["--outofplace"]]),
})


def _compile_case(tmp_path, capsys, text: str, opts: dict) -> None:
    topo = tmp_path / "t.yaml"
    topo.write_text(text, encoding="utf-8")
    out = tmp_path / ("o.xml" if opts["backend"] == "msccl" else "o.oneccl.xml")
    if out.exists():
        out.unlink()
    argv = [str(topo), "-o", str(out), "--collective", opts["collective"],
            "--algorithm", opts["algorithm"], "--protocol", opts["protocol"],
            "--instances", str(opts["instances"]), "--backend", opts["backend"], *opts["mode"]]
    rc = main(argv)
    err = capsys.readouterr().err
    note = f"\n{text}\n{' '.join(argv)}\n{err}"
    assert rc in (0, 1), note
    if rc == 1:
        assert "internal error" not in err, note
        assert not out.exists(), note
        return
    assert out.exists(), note
    if opts["backend"] == "msccl":
        assert main(["verify", str(out)]) == 0, note + capsys.readouterr().err
        capsys.readouterr()


@settings(settings.get_profile(PROFILE))
@given(text=explicit_topologies(), opts=OPTIONS)
def test_explicit_topologies_compile_or_fail_cleanly(tmp_path, capsys, text, opts):
    _compile_case(tmp_path, capsys, text, opts)


@settings(settings.get_profile(PROFILE))
@given(text=family_topologies(), opts=OPTIONS)
def test_family_topologies_compile_or_fail_cleanly(tmp_path, capsys, text, opts):
    _compile_case(tmp_path, capsys, text, opts)


@settings(settings.get_profile(PROFILE), max_examples=PARSE_EXAMPLES)
@given(text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_random_text_parses_or_is_a_spec_error(text):
    _parse(text)


@settings(settings.get_profile(PROFILE), max_examples=PARSE_EXAMPLES)
@given(base=st.one_of(explicit_topologies(), family_topologies()), data=st.data())
def test_mutated_topologies_parse_or_are_spec_errors(base, data):
    cut = data.draw(st.integers(0, len(base)))
    junk = data.draw(st.sampled_from(["", "[", "]", "{", "}", ":", "&a ", "*a", "- ", "\n  ",
                                      "-1", "1e999", "nan", "'", "\"", "!!python/object ",
                                      "<<: *a\n", "\t", "0x10", "~", "\ufeff"]))
    _parse(base[:cut] + junk + base[cut:])


def _parse(text: str) -> None:
    assume(len(text) < 10_000)
    try:
        topo = parse_topology_text(text, "fuzz.yaml")
    except (SpecError, TopologyError) as err:
        msg = str(err)
        assert msg.startswith("fuzz.yaml") and "\n" not in msg.strip(), msg
        return
    assert len(topo.ranks) >= 2
