"""The README's findings come from the result files, and every figure it shows exists and is indexed."""

import re
import subprocess
import sys

import pytest

from eie import findings
from eie.paths import repo_root

ROOT = repo_root()


def test_readme_findings_tables_match_the_result_files():
    blocks = findings.generated_blocks()
    assert len(blocks) >= 3, "the front page and the two verdict runs' reports carry generated tables"
    reports = {path.parent.name for path in blocks}
    assert {"sensitivity_lr_rule", "sensitivity_batchnorm"} <= reports, "the sensitivity reports carry them too"
    for readme, content in blocks.items():
        assert findings.readme_block(readme.read_text()) == content, \
            f"{readme} findings are stale: run `python -m eie.findings --write`"


def test_the_generated_block_changes_with_the_files(tmp_path):
    """A changed result file changes the generated tables (so the check above is not vacuous)."""
    for run, _problem, _ in findings.VERDICT_RUNS[:1]:
        source = ROOT / "results" / run
        target = tmp_path / "results" / run
        target.mkdir(parents=True)
        table = (source / "tsp.csv").read_text().splitlines()
        header, rows = table[0], table[1:]
        changed = [r.replace(",eie,0,1600,", ",eie,0,1600,1") if ",eie,0,1600," in r else r for r in rows]
        (target / "tsp.csv").write_text("\n".join([header, *changed]) + "\n")
        (target / "tsp_instance_costs.npz").write_bytes((source / "tsp_instance_costs.npz").read_bytes())
    assert findings.findings_markdown(tmp_path) != findings.findings_markdown()


def test_replace_block_needs_the_markers():
    with pytest.raises(ValueError, match="no generated block"):
        findings.replace_block("# README\n", "x")
    text = f"a\n{findings.BEGIN}\nold\n{findings.END}\nb\n"
    assert findings.readme_block(findings.replace_block(text, "new\n")) == "new\n"


def test_readme_stays_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


@pytest.mark.parametrize("report", sorted((ROOT / "results").glob("*/README.md")), ids=lambda p: p.parent.name)
def test_run_reports_are_reports(report):
    assert len(report.read_text().splitlines()) <= 200, f"{report}: a run report is at most 200 lines (LOG.md holds the chronology)"


def test_every_figure_the_readme_shows_exists():
    text = (ROOT / "README.md").read_text()
    for path in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        assert (ROOT / path).is_file(), f"README shows {path}, which does not exist"


def test_figure_index_lists_every_figure():
    index = (ROOT / "figures" / "README.md").read_text()
    missing = [p.name for p in (ROOT / "figures").glob("*.png") if f"[{p.name}]" not in index]
    assert not missing, f"figures/README.md misses {missing}: run `python scripts/figure_index.py`"


def test_findings_cli_check_passes_on_the_committed_readme():
    result = subprocess.run([sys.executable, "-m", "eie.findings", "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_nbval_leaves_the_tracked_files_as_it_found_them():
    """notebooks/conftest.py puts back every tracked file under results/ and figures/ that executing
    the notebooks rewrote: a marker written into the verdict figure survives notebook 09 rewriting it."""
    figure = ROOT / "figures" / "verdict.png"
    original = figure.read_bytes()
    try:
        figure.write_bytes(b"marker")
        result = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "notebooks/09_findings.ipynb", "-q",
                                 "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, result.stdout[-2000:]
        assert figure.read_bytes() == b"marker"
    finally:
        figure.write_bytes(original)


def test_verdict_panel_axis_reaches_only_the_paper_rows_it_draws():
    """Bin packing's paper table has a ln(n)/sqrt(d) row at -31 %; a panel that draws only EIE against
    1/sqrt(d) sizes its axis to the paper's EIE effects (at most +16 %), not to that row."""
    import matplotlib.pyplot as plt
    import pandas as pd

    rows = [{"setting": "120x100", "method": m, "seed": s, "n": n, "objective": 78.0}
            for m in ("inv_sqrt_d", "eie") for s in (0, 1) for n in (100, 200, 400, 800, 1600)]
    fig, ax = plt.subplots()
    try:
        findings.verdict_panel(ax, None, "bpp", pd.DataFrame(rows), "120x100", "bpp")
        low, high = ax.get_ylim()
    finally:
        plt.close(fig)
    paper_eie = 100 * (72.6 / 62.6 - 1)
    assert high == pytest.approx(paper_eie + 1) and low == -high
