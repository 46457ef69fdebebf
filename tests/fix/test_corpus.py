"""``fix --write`` on a copy of every corpus manifest (../shared/corpus/manifests), then
lint the copy: the fixed findings are gone, no new finding appears, every changed file
reads back as the same objects apart from the fixed fields, and every other file is
byte-identical. A second run changes nothing."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("ruamel.yaml")

from svcdoctor.checks import Settings
from svcdoctor.cli import cli
from svcdoctor.cli.lint import lint_paths
from svcdoctor.fix import apply, make_plan
from svcdoctor.manifests import load

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "manifests"

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"no corpus at {CORPUS} (CI clones lack ../shared)"
)

Key = tuple[str, str, str, str | None]


def keys(root: Path) -> Counter[Key]:
    result, _ = lint_paths(["."], Settings(), 32)
    del root
    return Counter(
        (f.rule, f.location.file, str(f.object), f.container)
        for f in result.findings
        if f.cause is not None
    )


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_fix_write_on_the_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    copy = tmp_path / "corpus"
    shutil.copytree(CORPUS, copy)
    monkeypatch.chdir(copy)
    before_files = snapshot(copy)
    before = keys(copy)
    result, loaded = lint_paths(["."], Settings(), 32)
    plan = make_plan(result, loaded)

    run = CliRunner().invoke(cli, ["fix", "--write", "."], catch_exceptions=False)
    assert run.exit_code in (1, 2), run.output  # 2: the corpus holds invalid files
    changed = {
        line.split(" ", 2)[1] for line in run.stdout.splitlines() if line.startswith("fixed ")
    }
    skipped = [
        line for line in run.stderr.splitlines() if line.startswith("svcdoctor fix: skipped")
    ]
    after_files = snapshot(copy)
    after = keys(copy)

    # every other file is byte-identical
    for name, data in before_files.items():
        if str(Path(name)) not in {str(Path(c)) for c in changed}:
            assert after_files[name] == data, name

    refused = {
        tuple(line.split(" ", 4)[3].rsplit(":", 1))
        for line in skipped
        if line.split(" ", 4)[3].rsplit(":", 1)[-1].isdigit()
    }  # "svcdoctor fix: skipped FILE:LINE KIND NAME: reason": objects left alone
    fixes = [f for f in plan.fixes if f.file in changed and (f.file, str(f.line)) not in refused]
    fixed: Counter[Key] = Counter(
        (g.rule, g.location.file, str(g.object), g.container) for f in fixes for g in f.findings
    )
    # the fixed findings are gone, no new finding appears
    assert not [k for k in fixed if k in after], [k for k in fixed if k in after][:5]
    new = after - before
    assert not new, list(new)[:5]

    # each changed file reads back as the same objects, apart from the fixed fields
    by_file = {}
    for f in fixes:
        by_file.setdefault(f.file, {})[f.line] = f.patch
    for name in changed:
        (tmp_path / "orig.yaml").write_bytes(before_files[str(Path(name))])
        original = load([str(tmp_path / "orig.yaml")])
        now = load([name])
        assert len(original.objects) == len(now.objects), name
        patches = by_file.get(name, {})
        for was, is_ in zip(original.objects, now.objects, strict=True):
            patch = patches.get(was.location.line)
            want = apply(dict(was.body), patch) if patch else dict(was.body)
            assert want == is_.body, (name, was.location.line)

    # a second run changes nothing
    again = CliRunner().invoke(cli, ["fix", "--write", "."], catch_exceptions=False)
    assert not [ln for ln in again.stdout.splitlines() if ln.startswith("fixed ")]
    assert snapshot(copy) == after_files

    files = sum(1 for n in before_files if n.endswith((".yaml", ".yml", ".json")))
    print(
        f"\ncorpus: {files} manifest files, {sum(fixed.values())} findings fixed, "
        f"{len(changed)} files changed, {len(skipped)} files or objects refused "
        f"({sum('SVD002' in s for s in skipped)} Helm templates), "
        f"{time.monotonic() - started:.0f} s"
    )
