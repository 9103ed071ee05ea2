"""``colc report``: the HTML page's content, its determinism, and that a real
browser (headless Chromium, when installed) runs its check script on it."""

from __future__ import annotations

import html

import copy
import os
import re
import shutil
import subprocess

import pytest

from colc.backends.report_html import render_report
from colc.cli import main
from colc.compiler.report_data import gather_report
from colc.frontends.families import ring
from colc.ir.core import Collective
from colc.sizes import parse_sizes

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Seconds Chromium may take to load and dump the page.
CHROMIUM_TIMEOUT = 90


@pytest.fixture(scope="module")
def report() -> tuple[dict, str]:
    """Data and page of a 4-rank bidirectional ring with an allgather portfolio."""
    data = gather_report(ring(4, 10, bidirectional=True), collective=Collective.ALLGATHER,
                         sizes=parse_sizes("1K:1M"))
    return data, render_report(data)


def _chromium() -> str | None:
    found = shutil.which("chromium")
    if found is None and os.access("/usr/bin/chromium", os.X_OK):
        found = "/usr/bin/chromium"
    return found


def test_data_has_every_part(report) -> None:
    data, _ = report
    assert data["topology"]["ranks"] == 4
    assert [b["collective"] for b in data["bounds"]] == ["allgather", "reducescatter",
                                                         "allreduce"]
    assert [p["collective"] for p in data["plots"]] == ["allgather", "reducescatter",
                                                        "allreduce"]
    for plot in data["plots"]:
        kinds = [s["kind"] for s in plot["series"]]
        assert "bound" in kinds and "algorithm" in kinds
        assert ("portfolio" in kinds) == (plot["collective"] == "allgather")
        for s in plot["series"]:
            assert s["points"] and all(bw > 0 for _, bw, _ in s["points"])
    port = data["portfolio"]
    assert port["collective"] == "allgather" and not port["error"] and port["windows"]
    assert port["windows"][0]["lo"] == 0 and port["windows"][-1]["hi"] == 0


def test_page_has_tables_and_plots(report) -> None:
    data, page = report
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    for table in ("bounds", "schedules", "portfolio"):
        assert f'<table class="{table}">' in page
    assert page.count('<svg class="plot"') == len(data["plots"]) == 3
    assert page.count("<polyline") == sum(len(p["series"]) for p in data["plots"])
    assert page.count("<tr><td>") >= len(data["portfolio"]["windows"]) + 3
    # Self-contained: nothing is fetched from anywhere.
    assert not re.search(r"""(src|href)\s*=|@import|url\(|https?://(?!www\.w3\.org/2000/svg")""",
                         page)
    assert "<polyline points=\"\"" not in page
    # the budget every file keeps to is stated (it was not)
    assert f"threadblock budget</dt><dd>{data['topology']['budget']} per GPU" in page
    assert data["topology"]["budget"] == 32


def test_page_is_deterministic_and_escaped(report) -> None:
    data, page = report
    assert render_report(copy.deepcopy(data)) == page
    evil = copy.deepcopy(data)
    evil["title"] = "colc report: <script>alert(1)</script>"
    evil["topology"]["name"] = 'a"b&<c>'
    evil["notes"] = ["x < y & z"]
    text = render_report(evil)
    assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    # escaped, whichever entity the template engine picks for the quote
    assert 'a"b&<c>' not in text and "x &lt; y &amp; z" in text
    assert 'a"b&<c>' in html.unescape(text)


def test_chromium_runs_the_check_script(report, tmp_path) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed")
    data, page = report
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    profile = tmp_path / "profile"
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={profile}", "--dump-dom", path.as_uri()]
    env = dict(os.environ, HOME=str(tmp_path))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT,
                              env=env, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not dump the page within {CHROMIUM_TIMEOUT} s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", proc.stdout)
    assert body is not None, proc.stdout[:2000]
    attrs = dict(re.findall(r'data-(\w+)="([^"]*)"', body.group(1)))
    assert attrs.get("ok") == "1", attrs
    assert attrs.get("plots") == str(len(data["plots"]))
    assert attrs.get("lines") == str(sum(len(p["series"]) for p in data["plots"]))


def test_cli_writes_the_page(tmp_path, capsys) -> None:
    out = tmp_path / "report.html"
    rc = main(["report", os.path.join(REPO, "examples", "ring-4.yaml"), "-o", str(out),
               "--no-portfolio", "--sizes", "1K:64K"])
    assert rc == 0
    assert capsys.readouterr().err.strip() == f"colc: wrote {out}"
    page = out.read_text(encoding="utf-8")
    assert '<svg class="plot"' in page and "Not built (--no-portfolio)." in page


def test_cli_bad_sizes_is_one_line(tmp_path, capsys) -> None:
    out = tmp_path / "report.html"
    rc = main(["report", os.path.join(REPO, "examples", "ring-4.yaml"), "-o", str(out),
               "--sizes", "1Q"])
    assert rc == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--sizes" in err and "1Q" in err
    assert not out.exists() and os.listdir(tmp_path) == []
