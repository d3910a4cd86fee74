"""``symgrad tour`` tells the truth: the picture files it names exist, and the compile counts it
prints are the cache's own."""
import re

import codegen
from symgrad import tour


def test_the_tour_writes_the_picture_it_names_and_counts_compiles_honestly(tmp_path, capsys):
    before = codegen.stats.compiles
    tour.run(picture_dir=tmp_path)
    out = capsys.readouterr().out
    written = re.findall(r"^written: (.*seed-graph.*)$", out, re.M)
    assert written[0] == str(tmp_path / "seed-graph.dot")
    assert "digraph symgrad" in (tmp_path / "seed-graph.dot").read_text()
    if len(written) == 2:  # Graphviz installed
        assert (tmp_path / "seed-graph.svg").read_text().lstrip().startswith("<?xml")
    else:
        assert "note: no picture" in out
    during = int(re.search(r"programs compiled during the loop: (\d+)", out).group(1))
    steps = [int(n) for n in re.findall(r"step \d+: (\d+)", out)]
    assert during == sum(steps) and during <= codegen.stats.compiles - before
    assert "the program is compiled once" not in out  # what it said while compiling two
    replayed = int(re.search(r"(\d+) steps replayed", out).group(1))
    assert replayed >= 90 if codegen.speed.fast else replayed == 0
    artifact = tmp_path / "seed-gradient"
    assert f"written: {artifact}" in out and (artifact / "manifest.json").exists()
    loss = float(re.search(r"loss after 100 steps: ([\d.]+)", out).group(1))
    assert f"loaded back and called: loss {loss:.4f}" in out
